package daemon_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	urlScheme    = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	// docPath is a path of a document in backquotes: `docs/mcpd.md`,
	// `../prometheus/mcpd-rules.yml`.
	docPath = regexp.MustCompile("`((?:\\.\\./)*[\\w.-]+(?:/[\\w.-]+)+\\.(?:md|ya?ml|json))`")
)

// No document of the repository points to a file outside it: every
// relative link of a Markdown file resolves to a file of the repository,
// and so does every document path a Markdown or YAML file names in
// backquotes.
func TestDocsPointInsideTheRepo(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "dist", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		if ext != ".md" && ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		checked++
		inside := func(target string) bool {
			r, err := filepath.Rel(root, filepath.Join(filepath.Dir(path), target))
			return err == nil && !strings.HasPrefix(r, "..")
		}
		// A document named in backquotes is a file of the repository,
		// relative to the document or to the repository's root.
		for _, m := range docPath.FindAllSubmatch(b, -1) {
			p := string(m[1])
			_, errRel := os.Stat(filepath.Join(filepath.Dir(path), p))
			_, errRoot := os.Stat(filepath.Join(root, p))
			if !inside(p) || (errRel != nil && errRoot != nil) {
				t.Errorf("%s names a document that is not in the repository: %s", rel, p)
			}
		}
		if ext != ".md" {
			return nil
		}
		for _, m := range markdownLink.FindAllSubmatch(b, -1) {
			target := string(m[1])
			if urlScheme.MatchString(target) || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if !inside(target) {
				t.Errorf("%s links outside the repository: %s", rel, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				t.Errorf("%s links to a missing file: %s", rel, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d documents found under %s", checked, root)
	}
}
