// Package pgsession prepares each new connection of mcpd's pools: uuid
// parameters encoded as bytes (pguuid) and, on Citus, the session
// settings that mcpd's statements are made for.
package pgsession

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/pguuid"
)

// CitusExecutorPoolSize is how many connections to one worker a
// distributed statement of mcpd's session may use
// (citus.max_adaptive_executor_pool_size; Citus's default is 16), unless
// the server's configuration, the database, the role or the connection's
// options set it.
//
// mcpd's statements that read several shards (the counts behind
// /metrics, the undelivered alerts, the feed's reads of many tenants) do
// little on each shard. Citus
// runs them over the connection its session already holds to each worker
// and opens more when the tasks are not done within
// citus.executor_slow_start_interval (10 ms); it closes those at the end
// of the transaction (citus.max_cached_conns_per_worker is 1). On a busy
// machine tasks run past 10 ms, so each such statement started new worker
// sessions, which cost more CPU and made the next statements slower. Over
// one connection per worker they do not (docs/scaling.md).
const CitusExecutorPoolSize = 1

// citusSettings sets the session's executor pool where Citus is loaded
// and nothing but its default set it; elsewhere it sets nothing (no
// placeholder setting on plain PostgreSQL). A statement without
// parameters: one round trip, through a pooler too.
var citusSettings = fmt.Sprintf(`SELECT set_config(name, '%d', false) FROM pg_settings
	WHERE name = 'citus.max_adaptive_executor_pool_size' AND source = 'default'`, CitusExecutorPoolSize)

// settingsTimeout bounds the statement that sets a new connection's
// session settings: a connection the pool opens in the background has no
// deadline of its own, and a server that hangs after it accepted the
// connection would hold that connection's slot forever. Tests shorten it.
var settingsTimeout = 5 * time.Second

// AfterConnect prepares conn, then runs next when it is not nil: a
// pgxpool.Config's AfterConnect.
func AfterConnect(next func(context.Context, *pgx.Conn) error) func(context.Context, *pgx.Conn) error {
	return pguuid.AfterConnect(func(ctx context.Context, conn *pgx.Conn) error {
		sctx, cancel := context.WithTimeout(ctx, settingsTimeout)
		_, err := conn.Exec(sctx, citusSettings)
		cancel()
		if err != nil {
			return fmt.Errorf("session settings: %w", err)
		}
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	})
}
