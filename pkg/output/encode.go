package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// WriteJSON writes v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// WriteYAML writes v as YAML with the keys of its JSON form: v is encoded
// to JSON first and decoded into plain maps, so struct tags, omitempty and
// custom marshalers apply exactly as for -o json. Map keys come out sorted.
func WriteYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	enc := yaml.NewEncoder(w)
	generic = numbers(generic)
	enc.SetIndent(2)
	if err := enc.Encode(generic); err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	return enc.Close()
}

// Write writes v in a structured format (json or yaml).
func Write(w io.Writer, f Format, v any) error {
	switch f {
	case JSON:
		return WriteJSON(w, v)
	case YAML:
		return WriteYAML(w, v)
	}
	return fmt.Errorf("format %q is not structured", f)
}

// numbers replaces the json.Numbers of a decoded JSON value by int64 (when
// integral) or float64, which yaml.v3 writes as plain numbers.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
