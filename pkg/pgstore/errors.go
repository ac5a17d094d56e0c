package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/registry"
)

// translate maps driver errors to the domain's sentinels, once, at the edge.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return registry.ErrNotFound
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return fmt.Errorf("%w: %w", registry.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == quotaExceededCode {
			return registry.ErrQuotaExceeded
		}
		if unavailableCode(pgErr.Code) || citusNodeFailure(pgErr) {
			return fmt.Errorf("%w: %w", registry.ErrUnavailable, err)
		}
		return err
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %w", registry.ErrUnavailable, err)
	}
	return err
}

// unavailableCode reports whether a server error of SQLSTATE code says that
// the database cannot serve now rather than that the request is wrong: the
// connection is lost, the server shuts down, starts up or has no room, the
// statement ran out of time, the database is read-only (a standby, or a
// host of a multi-host URL without target_session_attrs=read-write), or the
// transaction was rolled back for a conflict with others (a deadlock, local
// or one Citus found across nodes, a serialization failure, a lock waited
// for past lock_timeout) that outlived the store's own retry. These are 503
// with Retry-After, never 500: nothing of the request was written, and the
// same request may succeed a moment later.
func unavailableCode(code string) bool {
	switch code {
	case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow,
		pgerrcode.QueryCanceled,
		pgerrcode.ReadOnlySQLTransaction,
		pgerrcode.DeadlockDetected, pgerrcode.SerializationFailure, pgerrcode.LockNotAvailable:
		return true
	}
	return pgerrcode.IsConnectionException(code) || pgerrcode.IsInsufficientResources(code)
}

// citusNodeFailures begin the messages of the errors by which Citus says
// that a node it needed failed during the statement: a connection that
// broke in the middle of a distributed transaction, a node it could not
// reach to fetch a result or to prepare a commit, the node shutting down.
// Citus raises them as internal errors (XX000), not as connection
// exceptions; a black-box run saw "failure on connection marked as
// essential" answered 500 at the moment a worker stopped.
var citusNodeFailures = []string{
	"failure on connection marked as essential",
	"cannot connect to ",
	"failed to read result ",
	"failed to prepare transaction ",
	"postmaster was shut down",
}

// citusNodeFailure reports whether err is one of citusNodeFailures: like
// a lost connection, the database cannot serve now.
func citusNodeFailure(err *pgconn.PgError) bool {
	if err.Code != pgerrcode.InternalError {
		return false
	}
	for _, prefix := range citusNodeFailures {
		if strings.HasPrefix(err.Message, prefix) {
			return true
		}
	}
	return false
}

// ErrReadOnly is the cause of registry.ErrUnavailable when the database
// answers but cannot write.
var ErrReadOnly = errors.New("the database is read-only (a standby, or default_transaction_read_only is on)")
