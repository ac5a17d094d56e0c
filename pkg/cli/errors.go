package cli

import (
	"errors"
	"fmt"
)

// Exit codes of mcpctl.
const (
	ExitOK     = 0 // success
	ExitFailed = 1 // a call or an operation failed
	ExitUsage  = 2 // bad usage: unknown command or flag, invalid argument
)

// UsageError is bad usage of a command: exit code 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usagef returns a UsageError with a formatted message.
func usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// runError marks an error returned by the work of a command (an xRun), as
// opposed to one cobra returned while parsing: exit code 1.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// failed marks err as a failure of the work, keeping usage errors as they are.
func failed(err error) error {
	if err == nil {
		return nil
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	return &runError{err: err}
}

// silentError is a failure whose message was already printed: exit 1, no
// "Error:" line.
type silentError struct{ err error }

func (e *silentError) Error() string { return e.err.Error() }
func (e *silentError) Unwrap() error { return e.err }

// exitCode is the exit code for an error out of the command tree: usage
// errors and anything cobra returned before a command's work started are
// 2, failures of the work are 1.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	var re *runError
	if errors.As(err, &re) {
		return ExitFailed
	}
	return ExitUsage
}
