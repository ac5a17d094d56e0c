package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/internal/jsonscan"
	"github.com/cyberos/mcpd/pkg/registry"
)

// decodeBody reads the request body into v under the contract's rules: JSON
// content type (415), at most MaxBodyBytes (413), exactly one JSON object
// with nothing after it (400), and the strict rules of checkBody (400):
// member names exactly those of v's JSON tags, each at most once, and every
// string valid Unicode.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) *Problem {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return newProblem(http.StatusUnsupportedMediaType, ProblemUnsupportedMediaType, "Unsupported media type",
			"the body must be sent with Content-Type: application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != ContentTypeJSON {
		return newProblem(http.StatusUnsupportedMediaType, ProblemUnsupportedMediaType, "Unsupported media type",
			"the body must be application/json")
	}
	if r.ContentLength > MaxBodyBytes {
		return tooLargeProblem()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return tooLargeProblem()
		}
		return malformedProblem("the body could not be read")
	}
	// The nesting first, without recursion: nothing below walks more than
	// maxBodyDepth levels (encoding/json would call 10,001 levels invalid
	// JSON, and checkBody recurses once per level).
	if p := depthProblem(body); p != nil {
		return p
	}
	// The syntax next: when it is wrong, encoding/json's decoder says
	// where, and whether something follows the first value.
	if !json.Valid(body) {
		dec := json.NewDecoder(bytes.NewReader(body))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return decodeProblem(err)
		}
		return malformedProblem("the body must hold one JSON object and nothing after it")
	}
	// Then what encoding/json lets through: it matches names
	// case-insensitively, keeps the last of duplicate names, and replaces
	// invalid UTF-8 and lone surrogates with U+FFFD. After checkBody every
	// member name is one of v's, exactly.
	if p := checkBody(body, reflect.TypeOf(v)); p != nil {
		return p
	}
	if err := json.Unmarshal(body, v); err != nil {
		return decodeProblem(err)
	}
	return nil
}

// maxBodyDepth is how deep a request body may nest objects and arrays: the
// body's object, then a capability advertisement's levels
// (registry.MaxCapabilityDepth).
const maxBodyDepth = registry.MaxCapabilityDepth + 1

// depthProblem is the problem of a body nested more than maxBodyDepth
// levels deep, naming the member of the body's object in which it is; nil
// when it is not. The body need not be valid JSON: the scan follows
// strings and brackets, in one pass whatever the depth.
func depthProblem(body []byte) *Problem {
	depth := 0
	var object bool // the body is an object
	var name []byte // the latest string literal at the body's level: in an object, the member name before a value
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			start := i
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
			if depth == 1 {
				name = body[start:min(i+1, len(body))]
			}
		case '{', '[':
			if depth == 0 {
				object = body[i] == '{'
			}
			depth++
			if depth <= maxBodyDepth {
				continue
			}
			var member string
			if object && json.Unmarshal(name, &member) == nil && member != "" {
				return validationProblem(fieldName(member), registry.DepthReason(maxBodyDepth-1))
			}
			return malformedProblem("the body " + registry.DepthReason(maxBodyDepth))
		case '}', ']':
			depth--
		}
	}
	return nil
}

func tooLargeProblem() *Problem {
	return newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, "Payload too large",
		fmt.Sprintf("the body must be at most %d bytes", MaxBodyBytes))
}

// decodeProblem turns an error of json.Decoder.Decode into a problem.
func decodeProblem(err error) *Problem {
	var (
		maxErr    *http.MaxBytesError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		return tooLargeProblem()
	case errors.Is(err, io.EOF):
		return malformedProblem("the body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformedProblem("the body ends in the middle of a JSON value")
	case errors.As(err, &syntaxErr):
		return malformedProblem(fmt.Sprintf("the body is not valid JSON (at byte %d)", syntaxErr.Offset))
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return malformedProblem("the body must be a JSON object")
		}
		return validationProblem(typeErr.Field, fmt.Sprintf("has the wrong type: a JSON %s is not accepted here", typeErr.Value))
	}
	// encoding/json reports an unknown field only by its message; this is
	// the one place that reads an error's text.
	if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return validationProblem(name, "unknown field")
	}
	return malformedProblem("the body is not a valid JSON object")
}

// parseServerID parses a server_id, from a body or a path: the canonical
// 36-character form of a UUID.
func parseServerID(s string) (uuid.UUID, *Problem) {
	if s == "" {
		return uuid.Nil, validationProblem("server_id", "is required")
	}
	if len(s) != 36 {
		return uuid.Nil, validationProblem("server_id", "must be a UUID")
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, validationProblem("server_id", "must be a UUID")
	}
	return id, nil
}

// A body is checked against the shape of the type it is decoded into: the
// members of an object of a struct type must be named exactly as the
// struct's JSON tags, each at most once ("MODULE_NAME" is an unknown field,
// not module_name); an array is checked element by element; a free-form
// value (json.RawMessage, maps, interfaces: capability_advertisement) only
// needs valid strings and no key twice in one object. Every string of the body, member names included,
// must be valid UTF-8 without lone surrogate escapes ("\ud800"), which
// encoding/json would silently replace with U+FFFD and PostgreSQL's jsonb
// refuses. A value of another JSON type than its field's is left to the
// typed decoding, which names the field. The walk over the text is
// jsonscan's, which the token reader (pkg/auth) shares; its package comment
// says why no library does it.

// shape is what checkBody expects of a JSON value.
type shape struct {
	// fields is set for a struct: its members by JSON name.
	fields map[string]*shape
	// elem is set for a slice or an array: the shape of each element.
	elem *shape
	// free: any JSON value (json.RawMessage, a map, an interface).
	free bool
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	shapes         sync.Map // reflect.Type -> *shape
)

// shapeOf returns the shape of the JSON encoding of t.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, 0)
	shapes.Store(t, s)
	return s
}

func buildShape(t reflect.Type, depth int) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > 16 {
		return &shape{free: true}
	}
	switch {
	case t == rawMessageType:
		return &shape{free: true}
	case t.Kind() == reflect.Struct:
		s := &shape{fields: make(map[string]*shape)}
		addFields(s, t, depth)
		return s
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
		return &shape{elem: buildShape(t.Elem(), depth+1)}
	case t.Kind() == reflect.Map || t.Kind() == reflect.Interface:
		return &shape{free: true}
	}
	return &shape{} // a scalar
}

// addFields adds the JSON members of struct t to s, those of embedded
// structs included, as encoding/json names them.
func addFields(s *shape, t reflect.Type, depth int) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(s, ft, depth)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.fields[name] = buildShape(f.Type, depth+1)
	}
}

// checkBody checks the JSON text raw, valid and a single value, against the
// shape of t (see shape).
func checkBody(raw []byte, t reflect.Type) *Problem {
	c := bodyChecker{Scanner: jsonscan.Scanner{Data: raw}}
	return c.value(shapeOf(t), "")
}

// bodyChecker walks a valid JSON text.
type bodyChecker struct {
	jsonscan.Scanner
}

// value checks the next value against s; path names it in a problem ("" for
// the body itself).
func (c *bodyChecker) value(s *shape, path string) *Problem {
	switch c.Peek() {
	case '{':
		return c.object(s, path)
	case '[':
		return c.array(s, path)
	case '"':
		if _, bad := jsonscan.String(c.Value()); bad != nil {
			return stringProblem(path, unicodeReason(bad))
		}
		return nil
	}
	c.Value() // a number, true, false or null
	return nil
}

func (c *bodyChecker) object(s *shape, path string) *Problem {
	c.Enter()
	strict := s.fields != nil
	var seen []string            // the few members of a request type
	var seenFree map[string]bool // the keys of a free-form object
	for {
		lit, ok := c.Member()
		if !ok {
			return nil
		}
		name, bad := jsonscan.String(lit)
		if !strict {
			if bad != nil {
				return stringProblem(path, unicodeReason(bad))
			}
			// A key given twice is refused here too, at any depth: the
			// stores would keep different ones (jsonb the last, --dev
			// both), and readers disagree on which counts.
			if seenFree[name] {
				return validationProblem(path, fmt.Sprintf("the key %q appears more than once in one object",
					fieldName(name)))
			}
			if seenFree == nil {
				seenFree = make(map[string]bool)
			}
			seenFree[name] = true
			if p := c.value(s, path); p != nil {
				return p
			}
			continue
		}
		field, ok := s.fields[name]
		if bad != nil || !ok {
			return validationProblem(fieldName(name), "unknown field")
		}
		child := name
		if path != "" {
			child = path + "." + name
		}
		if slices.Contains(seen, name) {
			return validationProblem(child, "appears more than once")
		}
		seen = append(seen, name)
		if p := c.value(field, child); p != nil {
			return p
		}
	}
}

func (c *bodyChecker) array(s *shape, path string) *Problem {
	c.Enter()
	elem := s
	if s.elem != nil {
		elem = s.elem
	}
	for i := 0; c.Element(); i++ {
		// Elements that are objects are named by index (skills[2].name),
		// the others by their array's name (supported_protocols).
		child := path
		if elem.fields != nil {
			child = fmt.Sprintf("%s[%d]", path, i)
		}
		if p := c.value(elem, child); p != nil {
			return p
		}
	}
	return nil
}

// unicodeReason is why a string that jsonscan.String refused is refused.
func unicodeReason(bad error) string {
	if errors.Is(bad, jsonscan.ErrLoneSurrogate) {
		return "must be valid Unicode: it holds a lone surrogate escape (\\ud800-\\udfff without its pair)"
	}
	return "must be valid UTF-8"
}

// stringProblem is the problem of a string at path that is not valid
// Unicode.
func stringProblem(path, reason string) *Problem {
	if path == "" {
		return malformedProblem("the body " + reason)
	}
	return validationProblem(path, reason)
}

// fieldName is an unknown member name as a problem repeats it: valid UTF-8,
// at most 64 bytes, and "" quoted.
func fieldName(name string) string {
	if name == "" {
		return `""`
	}
	name = strings.ToValidUTF8(name, "\uFFFD")
	if len(name) > 64 {
		name = strings.ToValidUTF8(name[:64], "") + "…"
	}
	return name
}
