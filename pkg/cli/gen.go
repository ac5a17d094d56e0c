package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manDate is the date the generated man pages carry; fixed so that
// generating them twice gives the same files.
var manDate = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// docsRoot is the command tree the reference pages describe.
func docsRoot() *cobra.Command {
	root := NewRootCmd(NewFactory(&IOStreams{Out: io.Discard, ErrOut: io.Discard}))
	root.DisableAutoGenTag = true
	return root
}

// GenMarkdown writes a markdown reference page per command into dir.
func GenMarkdown(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("markdown docs: %w", err)
	}
	if err := doc.GenMarkdownTree(docsRoot(), dir); err != nil {
		return fmt.Errorf("markdown docs: %w", err)
	}
	return nil
}

// GenMan writes a man page (section 1) per command into dir.
func GenMan(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	header := &doc.GenManHeader{
		Title:   "MCPCTL",
		Section: "1",
		Source:  "mcpd",
		Manual:  "mcpctl manual",
		Date:    &manDate,
	}
	if err := doc.GenManTree(docsRoot(), header, dir); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	return nil
}

// GenCompletionFiles writes completions/mcpctl.bash, _mcpctl (zsh),
// mcpctl.fish and mcpctl.ps1 into dir.
func GenCompletionFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("completions: %w", err)
	}
	for shell, name := range CompletionFileNames {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("completions: %w", err)
		}
		err = GenCompletion(f, shell)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("completions: %w", err)
		}
	}
	return nil
}

// CompletionFileNames maps each shell to its file under completions/.
var CompletionFileNames = map[string]string{
	"bash":       "mcpctl.bash",
	"zsh":        "_mcpctl",
	"fish":       "mcpctl.fish",
	"powershell": "mcpctl.ps1",
}
