package termguard

import "syscall"

// termVar is the variable termenv looks at before asking the terminal.
const termVar = "TERM"

var (
	saved    string
	hadTerm  bool
	guarding bool
)

func init() {
	saved, hadTerm = syscall.Getenv(termVar)
	guarding = syscall.Setenv(termVar, "dumb") == nil
}

// Restore puts TERM back as the program was started with. Call it first
// thing in main's work: child processes and the TUI see the real TERM.
// Later calls do nothing.
func Restore() {
	if !guarding {
		return
	}
	guarding = false
	if hadTerm {
		_ = syscall.Setenv(termVar, saved)
	} else {
		_ = syscall.Unsetenv(termVar)
	}
}
