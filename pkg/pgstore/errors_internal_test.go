package pgstore

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Citus's errors for a node that failed during a statement are internal
// errors (XX000); they are 503s (registry.ErrUnavailable), not 500s. Other
// internal errors stay what they are.
func TestTranslateCitusNodeFailures(t *testing.T) {
	for _, tc := range []struct {
		err         *pgconn.PgError
		unavailable bool
	}{
		{&pgconn.PgError{Code: "XX000", Message: "failure on connection marked as essential: 127.0.0.1:25433"}, true},
		{&pgconn.PgError{Code: "XX000", Message: "cannot connect to 127.0.0.1:25433 to fetch intermediate results"}, true},
		{&pgconn.PgError{Code: "XX000", Message: `failed to read result "x" from node 127.0.0.1:25433`}, true},
		{&pgconn.PgError{Code: "XX000", Message: "failed to prepare transaction 'citus_0_1' on host 127.0.0.1:25433"}, true},
		{&pgconn.PgError{Code: "XX000", Message: "postmaster was shut down, exiting"}, true},
		{&pgconn.PgError{Code: "XX000", Message: "cannot have multiple metadata connections"}, false},
		{&pgconn.PgError{Code: "22023", Message: "failure on connection marked as essential: 127.0.0.1:25433"}, false},
	} {
		got := translate(tc.err)
		if errors.Is(got, registry.ErrUnavailable) != tc.unavailable {
			t.Errorf("translate(%s %q) = %v; unavailable: want %v", tc.err.Code, tc.err.Message, got, tc.unavailable)
		}
		var pgErr *pgconn.PgError
		if !errors.As(got, &pgErr) {
			t.Errorf("translate(%s %q) lost the server's error: %v", tc.err.Code, tc.err.Message, got)
		}
	}
}
