package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// FieldError is an input that breaks the contract's rules; Field names it as
// the API spells it.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Input limits of a registration.
const (
	MaxModuleNameLen = 63
	MaxProtocols     = 16
	MaxSkills        = 256
	MaxSkillNameLen  = 128
	MaxRemotes       = 8
	MaxRemoteURLLen  = 2048
	MaxDescription   = 100 // characters of a description or a title
	// MaxCapabilityDepth bounds how deep a capability advertisement nests
	// objects and arrays, the advertisement itself being the first level.
	MaxCapabilityDepth = 32
	// MaxCapabilityBytes bounds a capability advertisement as it is stored
	// and answered (CapabilitySize), not as it was sent.
	MaxCapabilityBytes = 64 << 10
)

// PublishedProtocols are the MCP revisions published when this build was
// made; later dates are accepted too, so new revisions need no release.
var PublishedProtocols = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

var (
	moduleNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// Semantic Versioning 2.0.0, the regular expression semver.org gives.
	semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
		`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	revisionRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// ValidModuleName reports whether s is 1-63 of [a-z0-9-], starting with a letter.
func ValidModuleName(s string) bool { return moduleNameRE.MatchString(s) }

// ValidVersion reports whether s is a semantic version.
func ValidVersion(s string) bool { return len(s) <= 256 && semverRE.MatchString(s) }

// ValidProtocol reports whether s is an MCP revision: one of the published
// revisions, or a real date later than the newest of them.
func ValidProtocol(s string) bool {
	if !revisionRE.MatchString(s) {
		return false
	}
	if _, err := time.Parse("2006-01-02", s); err != nil {
		return false
	}
	return slices.Contains(PublishedProtocols, s) || s > PublishedProtocols[len(PublishedProtocols)-1]
}

// Validate checks a registration against the contract's input rules.
func (info ServerInfo) Validate() error {
	if !ValidModuleName(info.ModuleName) {
		return &FieldError{"module_name", "must be 1-63 characters of [a-z0-9-], starting with a letter"}
	}
	if !ValidVersion(info.Version) {
		return &FieldError{"version", fmt.Sprintf("%q is not a semantic version (MAJOR.MINOR.PATCH)", truncate(info.Version))}
	}
	if n := len(info.SupportedProtocols); n < 1 || n > MaxProtocols {
		return &FieldError{"supported_protocols", fmt.Sprintf("must have 1-%d entries, has %d", MaxProtocols, n)}
	}
	for _, p := range info.SupportedProtocols {
		if !ValidProtocol(p) {
			return &FieldError{"supported_protocols", fmt.Sprintf("%q is not an MCP revision (YYYY-MM-DD: one of %s, or a later date)",
				truncate(p), strings.Join(PublishedProtocols, ", "))}
		}
	}
	if c := bytes.TrimSpace(info.CapabilityAdvertisement); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		var obj map[string]json.RawMessage
		if c[0] != '{' {
			return &FieldError{"capability_advertisement", "must be a JSON object"}
		}
		if jsonDepth(c) > MaxCapabilityDepth {
			return &FieldError{"capability_advertisement", DepthReason(MaxCapabilityDepth)}
		}
		if json.Unmarshal(c, &obj) != nil {
			return &FieldError{"capability_advertisement", "must be a JSON object"}
		}
		if reason := unstorableJSON(c); reason != "" {
			return &FieldError{"capability_advertisement", reason}
		}
		if reason := unstorableNumbers(c); reason != "" {
			return &FieldError{"capability_advertisement", reason}
		}
		if n := CapabilitySize(c, MaxCapabilityBytes); n > MaxCapabilityBytes {
			return &FieldError{"capability_advertisement", fmt.Sprintf("must be at most %d bytes as stored and "+
				"answered (each number written out in full: 1E1000 is 1,001 digits), is more than that", MaxCapabilityBytes)}
		}
	}
	if len(info.Skills) > MaxSkills {
		return &FieldError{"skills", fmt.Sprintf("at most %d skills, has %d", MaxSkills, len(info.Skills))}
	}
	seen := make(map[string]bool, len(info.Skills))
	for i, s := range info.Skills {
		if n := len([]rune(s.Name)); n < 1 || n > MaxSkillNameLen {
			return &FieldError{fmt.Sprintf("skills[%d].name", i), fmt.Sprintf("must be 1-%d characters", MaxSkillNameLen)}
		}
		if reason := lineProblem(s.Name); reason != "" {
			return &FieldError{fmt.Sprintf("skills[%d].name", i), reason}
		}
		if reason := lineProblem(s.Description); reason != "" {
			return &FieldError{fmt.Sprintf("skills[%d].description", i), reason}
		}
		if seen[s.Name] {
			return &FieldError{fmt.Sprintf("skills[%d].name", i), fmt.Sprintf("duplicate skill name %q", s.Name)}
		}
		seen[s.Name] = true
	}
	if len(info.Remotes) > MaxRemotes {
		return &FieldError{"remotes", fmt.Sprintf("at most %d remotes, has %d", MaxRemotes, len(info.Remotes))}
	}
	for i, r := range info.Remotes {
		if r.Type != RemoteStreamableHTTP && r.Type != RemoteSSE {
			return &FieldError{fmt.Sprintf("remotes[%d].type", i),
				fmt.Sprintf("%q is not a remote transport (%s or %s)", truncate(r.Type), RemoteStreamableHTTP, RemoteSSE)}
		}
		if reason := RemoteURLProblem(r.URL); reason != "" {
			return &FieldError{fmt.Sprintf("remotes[%d].url", i), reason}
		}
	}
	if err := checkLabel("description", info.Description); err != nil {
		return err
	}
	if err := checkLabel("title", info.Title); err != nil {
		return err
	}
	if info.TraceID != "" && !ValidTraceID(info.TraceID) {
		return &FieldError{"trace_id", "must be 32 lowercase hex digits"}
	}
	return nil
}

// RemoteURLProblem says why s is not a remote's URL: an absolute http or
// https URL of at most MaxRemoteURLLen bytes, with a host, without user
// information or a fragment. "" when it is one.
func RemoteURLProblem(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxRemoteURLLen:
		return fmt.Sprintf("must be at most %d bytes", MaxRemoteURLLen)
	case unstorableText(s) != "":
		return unstorableText(s)
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return "must not contain spaces or control characters"
	case strings.ContainsFunc(s, func(r rune) bool { return !uriChar(r) }):
		// server.schema.json's format "uri" (RFC 3986): what a registry
		// client validates must validate.
		return "must be a URI of ASCII characters: percent-encode the rest of its path, and give a host in punycode"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "must be an absolute http or https URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an absolute http or https URL (scheme http or https)"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case u.User != nil:
		return "must not hold user information (user:password@)"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not hold a fragment (#...)"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "must have a port from 1 to 65535"
		}
	}
	return ""
}

// uriChar reports whether r may stand in a URI as RFC 3986 writes it: an
// unreserved or reserved character, or the '%' of a percent-encoding.
func uriChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("-._~:/?#[]@!$&'()*+,;=%", r)
}

// checkLabel checks an optional description or title: empty, or 1-100
// characters of storable text on one line, without characters that change
// how the text around it is shown (labelControl).
func checkLabel(field, s string) error {
	if s == "" {
		return nil
	}
	if reason := lineProblem(s); reason != "" {
		return &FieldError{field, reason}
	}
	if n := utf8.RuneCountInString(s); n > MaxDescription {
		return &FieldError{field, fmt.Sprintf("must be 1-%d characters, has %d", MaxDescription, n)}
	}
	return nil
}

// LineProblem says why s cannot be a skill's name or description (see
// lineProblem); "" when it can.
func LineProblem(s string) string { return lineProblem(s) }

// lineProblem says why s cannot be one line of text that readers show (a
// description, a title, a skill's name or description): text PostgreSQL
// cannot store, or a character of labelControl. "" when it can.
func lineProblem(s string) string {
	if reason := unstorableText(s); reason != "" {
		return reason
	}
	if i := strings.IndexFunc(s, labelControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Sprintf("must not contain control characters, line breaks or bidirectional "+
			"overrides (U+%04X at byte %d)", r, i)
	}
	return ""
}

// OneLine makes s one line of text that Validate accepts in a skill's
// name or description: each run of control characters, line breaks and
// white space becomes one space, bidirectional overrides are dropped, and
// the ends are trimmed (for text taken from elsewhere, such as an MCP
// tool's description).
func OneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
			continue
		case labelControl(r) || unicode.IsSpace(r):
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// labelControl reports whether r may not stand in a description or a
// title, one line of text that the board, registry clients and terminals
// show: a control character (C0, DEL, C1: line breaks, tabs, terminal
// escapes), a line or paragraph separator, or a bidirectional embedding,
// override or isolate (U+202A-U+202E, U+2066-U+2069), which reorders what a
// reader sees. The bidirectional marks (LRM, RLM, ALM) that right-to-left
// text needs are letters' companions, and are kept.
func labelControl(r rune) bool {
	switch {
	case unicode.IsControl(r), r == '\u2028', r == '\u2029':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// Why text cannot be stored: PostgreSQL keeps text and jsonb in UTF-8,
// without the NUL character, and jsonb refuses a \u escape of a UTF-16
// surrogate that is not half of a pair.
const (
	reasonUTF8      = "must be valid UTF-8"
	reasonNUL       = "must not contain the NUL character (U+0000)"
	reasonSurrogate = "must be valid Unicode: it holds a lone surrogate escape (\\ud800-\\udfff without its pair)"
)

// TextProblem says why s cannot be a string that reaches the store (a
// query's filter, a name): PostgreSQL's text takes valid UTF-8 without NUL
// only, so invalid UTF-8 (also an overlong encoding such as C0 80) or NUL
// would be its error, not an answer. "" when s can be one.
func TextProblem(s string) string { return unstorableText(s) }

// unstorableText says why PostgreSQL cannot store s as text; "" when it can.
func unstorableText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return reasonUTF8
	case strings.IndexByte(s, 0) >= 0:
		return reasonNUL
	}
	return ""
}

// unstorableJSON says why PostgreSQL cannot store the valid JSON text raw as
// jsonb (invalid UTF-8, a \u0000 escape, a lone surrogate escape); "" when
// it can. In valid JSON a backslash only starts an escape in a string.
func unstorableJSON(raw []byte) string {
	if !utf8.Valid(raw) {
		return reasonUTF8
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] == 'u' {
			r, ok := hex4(raw, i+2)
			switch {
			case ok && r == 0:
				return reasonNUL
			case ok && r >= 0xD800 && r <= 0xDBFF:
				if low, ok := escapedRune(raw, i+6); !ok || low < 0xDC00 || low > 0xDFFF {
					return reasonSurrogate
				}
				i += 6 // the low half, checked
			case ok && r >= 0xDC00 && r <= 0xDFFF:
				return reasonSurrogate
			}
			i += 5
			continue
		}
		i++ // the escaped character, which may be a backslash
	}
	return ""
}

// DepthReason is why a JSON value nested more than limit levels deep is
// refused, as a FieldError's Reason says it.
func DepthReason(limit int) string {
	return fmt.Sprintf("nests objects and arrays more than %d levels deep", limit)
}

// jsonDepth is how deep the JSON text raw nests objects and arrays, raw
// itself being the first level when it is one. It reads brackets outside
// strings, without recursion, so that any depth is measured in one pass.
func jsonDepth(raw []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// CapabilitySize is how many bytes the valid JSON text raw, whose numbers
// PostgreSQL's numeric can hold, takes at most as it is stored and
// answered, by either store: whitespace aside (the API compacts an
// advertisement), each number and string at the longer of its form as sent
// and its form as jsonb writes it back (each number in full, 1E3 as 1000
// and 1e-3 as 0.001; escapes read and written again), with each '<', '>',
// '&', U+2028 and U+2029 of a string at the six bytes of the escape that
// the JSON of an answer writes, and a space after each ':' and ',' (as
// jsonb writes them). It stops counting past limit (limit < 0: never), so
// that a number of 131,072 digits costs one subtraction.
func CapabilitySize(raw []byte, limit int) int {
	size := 0
	for i := 0; i < len(raw) && (limit < 0 || size <= limit); i++ {
		switch c := raw[i]; {
		case c == '"':
			j := i + 1
			for ; j < len(raw) && raw[j] != '"'; j++ {
				if raw[j] == '\\' {
					j++
				}
			}
			size += stringSize(raw[i : j+1])
			i = j
		case c == ':' || c == ',':
			size += 2
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(raw) && strings.IndexByte("0123456789+-.eE", raw[j]) >= 0 {
				j++
			}
			size += max(j-i, numberSize(string(raw[i:j])))
			i = j - 1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default: // brackets and the letters of true, false and null
			size++
		}
	}
	return size
}

// stringSize is the size of the JSON string lit (quotes included) as sent
// or as jsonb and then an answer write it (escapes read, the text escaped
// again), whichever is longer.
func stringSize(lit []byte) int {
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return len(lit)
	}
	n := 2
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20, r == '<', r == '>', r == '&', r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return max(n, len(lit))
}

// numberSize is the length of the JSON number num as PostgreSQL's numeric
// writes it: without an exponent, a sign unless it is zero, the digits
// before the point from the first that is not zero (at least one), a point
// and the scale's digits when the scale (the digits after the point less
// the exponent) is above 0.
func numberSize(num string) int {
	n := 0
	if strings.HasPrefix(num, "-") {
		n, num = 1, num[1:]
	}
	mant, exp, hasExp := strings.Cut(num, "e")
	if !hasExp {
		mant, exp, _ = strings.Cut(mant, "E")
	}
	e, _ := strconv.Atoi(exp) // bounded by unstorableNumber
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	lead := 1
	if first := strings.IndexFunc(digits, func(r rune) bool { return r != '0' }); first >= 0 {
		lead = max(1, len(whole)+e-first)
	} else {
		n = 0 // a zero has no sign
	}
	if scale := len(frac) - e; scale > 0 {
		return n + lead + 1 + scale
	}
	return n + lead
}

// What PostgreSQL's numeric, the type of a jsonb number, holds: digits up
// to 10^131071 before the decimal point and 16,383 after it, and an
// exponent of at most INT_MAX/2 in the text.
const (
	numericMaxLeading = 131071
	numericMaxScale   = 16383
	numericMaxExp     = 1<<30 - 2
)

// unstorableNumbers says why PostgreSQL cannot store a number of the valid
// JSON text raw in jsonb (its value or its scale past numeric's); "" when
// it can. encoding/json reads such numbers as float64 infinities or zeros,
// so the rule is PostgreSQL's: both stores then take the same advertisements.
func unstorableNumbers(raw []byte) string {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(raw) && strings.IndexByte("0123456789+-.eE", raw[j]) >= 0 {
				j++
			}
			if reason := unstorableNumber(string(raw[i:j])); reason != "" {
				return reason
			}
			i = j - 1
		}
	}
	return ""
}

// unstorableNumber checks one JSON number against numericMax*.
func unstorableNumber(num string) string {
	mant, exp, hasExp := strings.Cut(strings.TrimPrefix(num, "-"), "e")
	if !hasExp {
		mant, exp, _ = strings.Cut(mant, "E")
	}
	whole, frac, _ := strings.Cut(mant, ".")
	e := 0
	if exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || n > numericMaxExp || n < -numericMaxExp {
			return fmt.Sprintf("the number %s is out of range: its exponent is past %d", truncate(num), numericMaxExp)
		}
		e = int(n)
	}
	if len(frac)-e > numericMaxScale {
		return fmt.Sprintf("the number %s is out of range: more than %d digits after the decimal point", truncate(num), numericMaxScale)
	}
	digits := whole + frac
	first := strings.IndexFunc(digits, func(r rune) bool { return r != '0' })
	if first >= 0 && len(whole)-1-first+e > numericMaxLeading {
		return fmt.Sprintf("the number %s is out of range: more than %d digits before the decimal point", truncate(num), numericMaxLeading+1)
	}
	return ""
}

// escapedRune reads a \uXXXX escape at raw[i:].
func escapedRune(raw []byte, i int) (rune, bool) {
	if i+1 >= len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	return hex4(raw, i+2)
}

// hex4 reads four hex digits at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
	return rune(n), err == nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
