package cli

import (
	"fmt"
	"io"
	"strings"

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
               (or, without the bash-completion package, which reads that
               directory: source <(mcpctl completion bash) in ~/.bashrc)
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
		return genBashCompletion(root, w)
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

// bashHeader opens mcpctl's bash completion script.
const bashHeader = `# bash completion for mcpctl. Load it with
#   source <(mcpctl completion bash)
# or install it as /etc/bash_completion.d/mcpctl (with the bash-completion
# package) or /usr/share/bash-completion/completions/mcpctl. It works with
# or without the bash-completion package; without it, a word holding = or :
# is split as bash splits it, and file names are not filtered by extension.
`

// bashFallbacks stand in for the bash-completion package's functions when
// it is not loaded; cobra's script calls them unguarded.
const bashFallbacks = `
# Without the bash-completion package: bash's own words.
__mcpctl_init_completion()
{
    COMPREPLY=()
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@" cur prev words cword
        return
    fi
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
}

# _filedir of the bash-completion package, else bash's own file (or, with
# -d, directory) names.
__mcpctl_filedir()
{
    if declare -F _filedir >/dev/null 2>&1; then
        _filedir "$@"
        return
    fi
    local IFS=$'\n' kind=-f
    [[ $1 == -d ]] && kind=-d
    [[ $(type -t compopt) == builtin ]] && compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen "$kind" -- "$cur"))
}
`

// genBashCompletion writes cobra's bash completion (V2) made to work
// without the bash-completion package: cobra's script calls
// _get_comp_words_by_ref and _filedir, which only that package defines, so
// every Tab failed in a bash without it.
func genBashCompletion(root *cobra.Command, w io.Writer) error {
	var b strings.Builder
	if err := root.GenBashCompletionV2(&b, true); err != nil {
		return err
	}
	script := b.String()
	name := root.Name()
	initStart := "__" + name + "_init_completion()\n{"
	start := strings.Index(script, initStart)
	end := strings.Index(script[max(start, 0):], "\n}\n")
	if start < 0 || end < 0 {
		return fmt.Errorf("bash completion: cobra's script has no %s_init_completion to replace", name)
	}
	before, after := script[:start], script[start+end+len("\n}\n"):]
	before = strings.Replace(before, "# Macs have bash3 for which the bash-completion package doesn't include\n"+
		"# _init_completion. This is a minimal version of that function.\n", "", 1)
	own := "__" + name + "_filedir"
	after = strings.NewReplacer(`filteringCmd="_filedir `, `filteringCmd="`+own+` `,
		" _filedir -d", " "+own+" -d", "    _filedir\n", "    "+own+"\n").Replace(after)
	for _, line := range strings.Split(after, "\n") {
		if l := strings.TrimSpace(line); !strings.HasPrefix(l, "#") && strings.Contains(strings.ReplaceAll(l, own, ""), "_filedir") {
			return fmt.Errorf("bash completion: a call of _filedir in cobra's script was not replaced: %s", l)
		}
	}
	fallbacks := strings.TrimPrefix(strings.ReplaceAll(bashFallbacks, "__mcpctl_", "__"+name+"_"), "\n")
	_, err := io.WriteString(w, bashHeader+before+fallbacks+after)
	return err
}
