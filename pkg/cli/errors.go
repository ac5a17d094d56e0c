package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
)

// Exit codes of mcpctl.
const (
	ExitOK     = 0 // success
	ExitFailed = 1 // a call or an operation failed
	ExitUsage  = 2 // bad usage: unknown command or flag, invalid argument, a file a flag names that cannot be read
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

// readFlagFile reads the file a flag names, at most max bytes. A file that
// is missing, unreadable or too large is bad usage (exit 2), whichever
// command reads it, with a message that names the flag.
func readFlagFile(flag, path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--%s %s: %s", flag, path, fileReason(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, usagef("--%s %s: %s", flag, path, fileReason(err))
	}
	if int64(len(b)) > limit {
		return nil, usagef("--%s %s: larger than %d bytes", flag, path, limit)
	}
	return b, nil
}

// fileReason says why a file could not be read, without repeating its path.
func fileReason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, syscall.EISDIR):
		return "is a directory"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// databaseError marks the failure of a call to PostgreSQL (migrate), so
// that the hint after it speaks of the database, not of mcpd.
type databaseError struct{ err error }

func (e *databaseError) Error() string { return e.err.Error() }
func (e *databaseError) Unwrap() error { return e.err }

// onDatabase marks err, when not nil, as a failure of a call to PostgreSQL.
func onDatabase(err error) error {
	if err == nil {
		return nil
	}
	return &databaseError{err: err}
}

// hint is a line that helps with a call that could not reach its server
// (mcpd at server, or PostgreSQL for migrate), or "" for other errors.
func hint(err error, server string) string {
	var (
		dial *net.OpError
		dns  *net.DNSError
	)
	isDial := errors.As(err, &dial) && dial.Op == "dial"
	if !isDial && !errors.As(err, &dns) {
		return ""
	}
	var db *databaseError
	if errors.As(err, &db) {
		at := "the database URL's host"
		if isDial && dial.Addr != nil {
			at = dial.Addr.String()
		}
		return fmt.Sprintf("Is PostgreSQL running at %s? Check --database-url or %s.", at, EnvDatabaseURL)
	}
	if server == "" {
		return ""
	}
	return fmt.Sprintf("Is mcpd running at %s? Set --server or %s.", server, EnvServer)
}
