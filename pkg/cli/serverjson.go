package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cyberos/mcpd/pkg/registry"
)

// serverJSON is what mcpctl reads of an official MCP registry server.json
// (schema 2025-12-11); other members are ignored.
type serverJSON struct {
	Name        string             `json:"name"`
	Version     string             `json:"version"`
	Description string             `json:"description"`
	Title       string             `json:"title"`
	Remotes     []serverJSONRemote `json:"remotes"`
	Packages    []json.RawMessage  `json:"packages"`
}

type serverJSONRemote struct {
	Type      string          `json:"type"`
	URL       string          `json:"url"`
	Headers   json.RawMessage `json:"headers"`
	Variables json.RawMessage `json:"variables"`
}

// maxServerJSONBytes bounds the server.json read.
const maxServerJSONBytes = 1 << 20

// moduleFromServerName is the module name of an official registry server
// name ("io.github.acme/Weather" is "weather"): the part after the slash,
// lower-cased. ok is false when that is not a valid module name.
func moduleFromServerName(name string) (module string, ok bool) {
	_, after, found := strings.Cut(name, "/")
	if !found {
		return "", false
	}
	module = strings.ToLower(after)
	return module, registry.ValidModuleName(module)
}

// completeRemotes checks --remote and --remote-type.
func (o *registerOptions) completeRemotes() error {
	if o.RemoteType != registry.RemoteStreamableHTTP && o.RemoteType != registry.RemoteSSE {
		return usagef("invalid --remote-type %q: want %s or %s", o.RemoteType, registry.RemoteStreamableHTTP, registry.RemoteSSE)
	}
	if len(o.Remotes) > registry.MaxRemotes {
		return usagef("at most %d --remote, have %d", registry.MaxRemotes, len(o.Remotes))
	}
	o.RemoteList = nil
	for _, u := range o.Remotes {
		if reason := registry.RemoteURLProblem(u); reason != "" {
			return usagef("invalid --remote %q: %s", u, reason)
		}
		o.RemoteList = append(o.RemoteList, registry.Remote{Type: o.RemoteType, URL: u})
	}
	return nil
}

// readServerJSON fills the registration from --server-json: the module,
// and the version, description, title and remotes not given as flags.
// Packages, and the headers and variables of remotes, are ignored with a
// note on stderr.
func (o *registerOptions) readServerJSON() error {
	b, err := readFlagFile("server-json", o.ServerJSON, maxServerJSONBytes)
	if err != nil {
		return err
	}
	var sj serverJSON
	if err := json.Unmarshal(b, &sj); err != nil {
		return usagef("--server-json %s: not a server.json object: %v", o.ServerJSON, err)
	}
	// encoding/json keeps the last of two members of one name, and matches
	// names in any case: the API refuses both, and so does mcpctl.
	if key := duplicateKey(b); key != "" {
		return usagef("--server-json %s: %s is given twice (names are matched in any case)", o.ServerJSON, key)
	}
	module, ok := moduleFromServerName(sj.Name)
	if !ok {
		return usagef("--server-json %s: name %q: the part after the slash, lower-cased, must be a module name "+
			"(1-63 of [a-z0-9-], starting with a letter)", o.ServerJSON, sj.Name)
	}
	o.Module = module
	if !o.set["version"] {
		o.Version = sj.Version
	}
	if !o.set["description"] {
		o.Description = sj.Description
	}
	if !o.set["title"] {
		o.Title = sj.Title
	}
	if len(sj.Packages) > 0 {
		fmt.Fprintf(o.IO.ErrOut, "Note: %s: %d packages ignored: mcpd registers where a server runs, not how to install it\n",
			o.ServerJSON, len(sj.Packages))
	}
	if o.set["remote"] {
		return nil
	}
	if len(sj.Remotes) > registry.MaxRemotes {
		return usagef("--server-json %s: at most %d remotes, has %d", o.ServerJSON, registry.MaxRemotes, len(sj.Remotes))
	}
	o.RemoteList = nil
	for i, r := range sj.Remotes {
		if r.Type != registry.RemoteStreamableHTTP && r.Type != registry.RemoteSSE {
			return usagef("--server-json %s: remotes[%d].type %q: want %s or %s", o.ServerJSON, i, r.Type,
				registry.RemoteStreamableHTTP, registry.RemoteSSE)
		}
		if reason := registry.RemoteURLProblem(r.URL); reason != "" {
			return usagef("--server-json %s: remotes[%d].url %q: %s", o.ServerJSON, i, r.URL, reason)
		}
		if len(r.Headers) > 0 && string(r.Headers) != "null" || len(r.Variables) > 0 && string(r.Variables) != "null" {
			fmt.Fprintf(o.IO.ErrOut, "Note: %s: remotes[%d]: headers and variables ignored\n", o.ServerJSON, i)
		}
		o.RemoteList = append(o.RemoteList, registry.Remote{Type: r.Type, URL: r.URL})
	}
	return nil
}

// duplicateKey is the path (remotes[0].url) of the first member name of
// the valid JSON text b that its object holds twice, also but for case
// (Name and name); "" when there is none.
func duplicateKey(b []byte) string {
	type level struct {
		path  string          // of the object or array
		names map[string]bool // an object's names, folded; nil for an array
		index int             // an array's next element
		key   bool            // an object expects a name next
	}
	var stack []*level
	dec := json.NewDecoder(bytes.NewReader(b))
	// child is the path of the value that starts now, inside the top level.
	child := func(name string) string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.names == nil {
			top.index++
			return top.path + "[" + strconv.Itoa(top.index-1) + "]"
		}
		if top.path == "" {
			return name
		}
		return top.path + "." + name
	}
	var name string // the member name whose value comes next
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.names != nil && top.key {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					if len(stack) > 0 && stack[len(stack)-1].names != nil {
						stack[len(stack)-1].key = true // the object was a member's value
					}
					continue
				}
				name, _ = tok.(string)
				folded := strings.ToLower(name)
				if top.names[folded] {
					return child(name)
				}
				top.names[folded], top.key = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			l := &level{path: child(name)}
			if tok == json.Delim('{') {
				l.names, l.key = map[string]bool{}, true
			}
			stack = append(stack, l)
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			child(name) // a scalar: counts as an array's element
		}
		// After a value, an object expects its next name.
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.names != nil && tok != json.Delim('{') {
				top.key = true
			}
		}
	}
}
