package cli

import (
	"encoding/json"
	"fmt"
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
