package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Shells lists the shells mcpctl writes completion scripts for.
var Shells = []string{"bash", "zsh", "fish", "powershell"}

func newCmdCompletion(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script",
		Long: `Print the completion script for a shell. Packages install them; by hand:

  bash:        mcpctl completion bash > /etc/bash_completion.d/mcpctl
  zsh:         mcpctl completion zsh > "${fpath[1]}/_mcpctl"
  fish:        mcpctl completion fish > ~/.config/fish/completions/mcpctl.fish
  powershell:  mcpctl completion powershell | Out-String | Invoke-Expression

Server IDs complete from the configured mcpd, with their module and status.`,
		ValidArgs:   Shells,
		Args:        exactArgs("SHELL"),
		Annotations: map[string]string{annotationSkipConfig: ""},
		RunE: func(cmd *cobra.Command, args []string) error {
			return failed(genCompletion(cmd.Root(), f.IOStreams.Out, args[0]))
		},
	}
}

// genCompletion writes root's completion script for shell.
func genCompletion(root *cobra.Command, w io.Writer, shell string) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(w)
	}
	return usagef("unknown shell %q: want one of bash, zsh, fish, powershell", shell)
}

// GenCompletion writes mcpctl's completion script for shell (bash, zsh,
// fish or powershell) to w.
func GenCompletion(w io.Writer, shell string) error {
	root := NewRootCmd(NewFactory(&IOStreams{Out: io.Discard, ErrOut: io.Discard}))
	if err := genCompletion(root, w, shell); err != nil {
		return fmt.Errorf("completion %s: %w", shell, err)
	}
	return nil
}
