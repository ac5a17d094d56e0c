// Package docs_test checks that the architecture notes name only what
// exists: every file, Go name and SQL function they put in backticks.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	// A Go name as the notes write one: Monitor, Registrar.Heartbeat,
	// finishServer, lifecycle.LogSink; not a plain lowercase word.
	goName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	// An SQL name: a function, table or column (mcp_audit_events.kind).
	sqlName = regexp.MustCompile(`^mcp_[a-z0-9_]+(\.[a-z_]+)?$`)
	// A path: has a slash or a file extension of the repository's.
	pathLike = regexp.MustCompile(`^[A-Za-z0-9_./-]+(/|\.(go|sql|md|yaml|yml))[A-Za-z0-9_./-]*$`)
)

// TestArchitectureNamesExist fails when docs/architecture.md names, in
// backticks, a file, a Go declaration or an SQL function or table that no
// longer exists, so that a rename or a removal updates the notes too.
func TestArchitectureNamesExist(t *testing.T) {
	t.Parallel()
	root := ".."
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile(filepath.Join(root, "migrations", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	names, bases := declarations(t, root)
	for _, m := range backticked.FindAllStringSubmatch(string(doc), -1) {
		span := strings.TrimSuffix(m[1], "()")
		switch {
		case strings.ContainsAny(span, "*") || strings.Contains(span, "NNNN"):
			// A pattern, not a name.
		case pathLike.MatchString(span) && !strings.HasPrefix(span, "/"):
			if strings.Contains(span, "/") {
				if _, err := os.Stat(filepath.Join(root, span)); err != nil {
					t.Errorf("architecture.md names %s: %v", span, err)
				}
			} else if !bases[span] {
				t.Errorf("architecture.md names the file %s: no file of that name in the repository", span)
			}
		case sqlName.MatchString(span):
			name, _, _ := strings.Cut(span, ".")
			if !regexp.MustCompile(`\bpublic\.` + name + `\b`).Match(schema) {
				t.Errorf("architecture.md names the SQL object %s: not in migrations/schema.sql", span)
			}
		case goName.MatchString(span) && (strings.Contains(span, ".") || strings.ToLower(span) != span):
			for _, part := range strings.Split(span, ".") {
				if !names[part] {
					t.Errorf("architecture.md names the Go name %s: %s is declared nowhere", span, part)
				}
			}
		}
	}
}

// located is Go names followed by the file they are in, as the notes
// write them: `Hub.Sink` (`pkg/feed/version.go`), or `A`, `B` (`a/b.go`).
var located = regexp.MustCompile("((?:`[A-Za-z_][A-Za-z0-9_.]*`,\\s+)*`[A-Za-z_][A-Za-z0-9_.]*`)\\s+\\(`([^`]+/[^`/]+\\.go)`")

// TestArchitectureNamesWhereSaid fails when docs/architecture.md places a
// Go name in a file that does not declare it, so that a name moved to
// another file (or never there) does not send a reader to the wrong one.
func TestArchitectureNamesWhereSaid(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, m := range located.FindAllStringSubmatch(string(doc), -1) {
		path := m[2]
		names := map[string]bool{}
		if err := declare(fset, filepath.Join("..", path), names); err != nil {
			t.Errorf("architecture.md places %s in %s: %v", m[1], path, err)
			continue
		}
		for _, name := range backticked.FindAllStringSubmatch(m[1], -1) {
			parts := strings.Split(name[1], ".")
			if last := parts[len(parts)-1]; !names[last] {
				t.Errorf("architecture.md places %s in %s, which does not declare %s", name[1], path, last)
			}
		}
	}
}

// declarations returns every name declared in the repository's Go files
// (packages, functions, methods, types, fields, interface methods, values)
// and every file's base name.
func declarations(t *testing.T, root string) (names, bases map[string]bool) {
	t.Helper()
	names, bases = map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != ".." && strings.HasPrefix(n, ".") || n == "node_modules" || n == "dist" {
				return filepath.SkipDir
			}
			return nil
		}
		bases[d.Name()] = true
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		return declare(fset, p, names)
	})
	if err != nil {
		t.Fatal(err)
	}
	return names, bases
}

// declare adds to names every name declared in the Go file p, as
// declarations describes them.
func declare(fset *token.FileSet, p string, names map[string]bool) error {
	f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	names[f.Name.Name] = true
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			names[n.Name.Name] = true
		case *ast.TypeSpec:
			names[n.Name.Name] = true
		case *ast.ValueSpec:
			for _, id := range n.Names {
				names[id.Name] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				names[id.Name] = true
			}
		case *ast.BasicLit:
			// A name the code spells as a string: an alert name.
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil {
				names[s] = true
			}
		}
		return true
	})
	return nil
}
