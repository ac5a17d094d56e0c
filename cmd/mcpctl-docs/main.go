// Command mcpctl-docs writes mcpctl's generated files from its command tree: the
// shell completions, the markdown reference and the man pages. `make
// completions` and `make docs` run it; the tests of pkg/cli fail when the
// committed files differ from what it writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cyberos/mcpd/pkg/cli"
)

func main() {
	completions := flag.String("completions", "", "write the shell completions into this directory")
	markdown := flag.String("markdown", "", "write the markdown reference into this directory")
	man := flag.String("man", "", "write the man pages into this directory")
	flag.Parse()
	if *completions == "" && *markdown == "" && *man == "" {
		fmt.Fprintln(os.Stderr, "mcpctl-docs: nothing to do: give -completions, -markdown and/or -man")
		os.Exit(2)
	}
	steps := []struct {
		dir string
		gen func(string) error
	}{
		{*completions, cli.GenCompletionFiles},
		{*markdown, cli.GenMarkdown},
		{*man, cli.GenMan},
	}
	for _, s := range steps {
		if s.dir == "" {
			continue
		}
		if err := s.gen(s.dir); err != nil {
			fmt.Fprintln(os.Stderr, "mcpctl-docs:", err)
			os.Exit(1)
		}
	}
}
