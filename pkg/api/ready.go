package api

import (
	"context"
	"errors"
	"fmt"
)

// ReadyCheck is one condition of readiness: the store answers and takes
// writes, the monitor's last sweep succeeded, and so on.
type ReadyCheck struct {
	// Name says what failed in /readyz's problem ("store", "monitor").
	Name  string
	Check Pinger
}

// ReadyChecks is a Pinger that is ready when every check is: /readyz
// answers 200 only when this process can serve and its monitor can sweep.
// The checks are asked in order; the first that fails is the answer, as a
// *NotReadyError.
type ReadyChecks []ReadyCheck

// Ping asks each check in order.
func (cs ReadyChecks) Ping(ctx context.Context) error {
	for _, c := range cs {
		if err := c.Check.Ping(ctx); err != nil {
			return &NotReadyError{Check: c.Name, Err: err}
		}
	}
	return nil
}

// PingFunc is a function that is a Pinger.
type PingFunc func(ctx context.Context) error

// Ping calls f.
func (f PingFunc) Ping(ctx context.Context) error { return f(ctx) }

// NotReadyError is the failure of one ReadyCheck.
type NotReadyError struct {
	Check string
	Err   error
}

func (e *NotReadyError) Error() string { return fmt.Sprintf("%s not ready: %v", e.Check, e.Err) }

func (e *NotReadyError) Unwrap() error { return e.Err }

// notReadyDetail is /readyz's problem detail for err: which check failed,
// never the cause's text (that is logged).
func notReadyDetail(err error) string {
	const what = "the store does not answer, is read-only, or its schema is not the version this build expects"
	var nr *NotReadyError
	if errors.As(err, &nr) && nr.Check != "" && nr.Check != "store" {
		return "not ready: " + nr.Check
	}
	return what
}
