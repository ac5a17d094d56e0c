// Command mcpctl-docs writes the generated files from the command trees: mcpctl's
// shell completions, markdown reference and man pages, and mcpd's man page
// beside them. `make completions` and `make docs` run it; the tests of
// pkg/cli and pkg/daemon fail when the committed files differ from what it
// writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cyberos/mcpd/pkg/cli"
	"github.com/cyberos/mcpd/pkg/daemon"
)

func main() {
	completions := flag.String("completions", "", "write the shell completions into this directory")
	markdown := flag.String("markdown", "", "write the markdown reference into this directory")
	man := flag.String("man", "", "write the man pages (mcpctl's and mcpd's) into this directory")
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
		{*man, daemon.GenMan},
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
