package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// decodeBody reads the request body into v under the contract's rules: JSON
// content type (415), at most MaxBodyBytes (413), exactly one JSON object
// with no unknown fields and nothing after it (400).
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
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err)
	}
	// Exactly one value: anything but whitespace after it is refused.
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return malformedProblem("the body must hold one JSON object and nothing after it")
	default:
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return tooLargeProblem()
		}
		return malformedProblem("the body must hold one JSON object and nothing after it")
	}
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
