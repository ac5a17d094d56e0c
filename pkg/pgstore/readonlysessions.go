package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Sessions opened while the database was read-only. PostgreSQL fixes a
// session's default_transaction_read_only when it starts from the
// database's and the role's settings (ALTER DATABASE … SET), so a session
// opened while they made the database read-only stays read-only after they
// are reset; only a reload of the server's own configuration reaches open
// sessions. Left alone, such sessions would refuse writes (503) until the
// pool retired them for their idle time or age, minutes after the database
// could write again. A pool of Connect's hands out no session that has
// reported default_transaction_read_only on (PostgreSQL 14 and later report
// it) for readOnlySessionAge: it closes it and opens another, which takes
// the database's settings of now. While the database stays read-only that
// is one new session per pooled session per readOnlySessionAge at most.

// readOnlySessionAge is how long a pooled session that reports itself
// read-only is handed out before it is replaced.
const readOnlySessionAge = time.Second

// readOnlySessions is when each pooled session was first seen read-only.
type readOnlySessions struct {
	mu    sync.Mutex
	since map[*pgx.Conn]time.Time
}

// retireReadOnlySessions makes cfg's pool replace the sessions that have
// been read-only for readOnlySessionAge, before handing them out.
func retireReadOnlySessions(cfg *pgxpool.Config) {
	r := &readOnlySessions{since: make(map[*pgx.Conn]time.Time)}
	prepare, beforeClose := cfg.PrepareConn, cfg.BeforeClose
	cfg.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
		if !r.keep(c, time.Now()) {
			return false, nil
		}
		if prepare != nil {
			return prepare(ctx, c)
		}
		return true, nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) {
		r.forget(c)
		if beforeClose != nil {
			beforeClose(c)
		}
	}
}

// keep reports whether session c may be handed out at now: it is not
// read-only, or has not been for readOnlySessionAge.
func (r *readOnlySessions) keep(c *pgx.Conn, now time.Time) bool {
	if c.PgConn().ParameterStatus("default_transaction_read_only") != "on" {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	first, seen := r.since[c]
	if !seen {
		r.since[c] = now
		return true
	}
	return now.Sub(first) < readOnlySessionAge
}

// forget drops what r knows of session c, which the pool closes.
func (r *readOnlySessions) forget(c *pgx.Conn) {
	r.mu.Lock()
	delete(r.since, c)
	r.mu.Unlock()
}
