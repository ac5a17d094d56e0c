package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cyberos/mcpd/pkg/pgsession"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Options configures a Store.
type Options struct {
	// Clock, when set, supplies every timestamp that decides a status (tests).
	// Nil: the database's now(), one clock for every replica.
	Clock  clockwork.Clock
	Logger *slog.Logger
	// MaxBatch bounds the heartbeats applied by one statement (default
	// DefaultMaxBatch); Flushers bounds the batches in flight at once
	// (default DefaultFlushers); on Citus each worker that the store
	// reaches directly has batches of its own, half as many in flight.
	MaxBatch int
	Flushers int
	// BatchWait is how long a batch waits for more heartbeats before it is
	// sent; 0 sends whatever is queued at once, which batches by itself
	// under load and adds no latency under light load.
	BatchWait time.Duration
	// BatchOverlap is how long a batch waits for the batch being applied
	// before it is applied beside it (default DefaultBatchOverlap;
	// negative: batches never wait for each other).
	BatchOverlap time.Duration
	// BatchTimeout bounds one batch's round trip (default 5 s).
	BatchTimeout time.Duration
	// WorkerStall is how long a call that serves several Citus workers
	// waits for one of them, and how long a call must run unanswered to
	// make its worker silent (default DefaultWorkerStall; stall.go).
	WorkerStall time.Duration
	// CoordinatorReads makes every read on Citus go through the
	// coordinator; by default a tenant's position and feed are read on
	// its worker when mcpd can reach it and the pool's host is not a Unix
	// socket (workerreads.go).
	CoordinatorReads bool
	// Tracer gives each traced heartbeat a span for its wait on its batch;
	// nil: OpenTelemetry's no-op provider. Statements get theirs from
	// ConnectTraced.
	Tracer trace.TracerProvider
}

// Store is the PostgreSQL store.Store.
type Store struct {
	pool         *pgxpool.Pool
	clock        clockwork.Clock
	logger       *slog.Logger
	batcher      *batcher
	batchTimeout time.Duration
	tracer       trace.Tracer
	// workerBatchers are, on Citus, the batchers of the tenants of each
	// worker reached directly (batcherFor); batcherOpts what each is made
	// with.
	workerBatchersMu sync.Mutex
	workerBatchers   map[int64]*batcher
	batchersClosed   bool
	batcherOpts      Options

	// engineMu guards engineKnown and citus: whether the database is a
	// Citus coordinator, asked once (onCitus).
	engineMu    sync.Mutex
	engineKnown bool
	citus       bool
	// sweptTenants is the last list of tenants the Citus sweep read;
	// savedTenants the last it saved on the coordinator (sweeplist.go).
	sweptTenants []uuid.UUID
	savedTenants []uuid.UUID
	// saveMu makes the store's saves of the list go one at a time.
	saveMu sync.Mutex
	// unswept are the tenants whose Citus sweep failed, since when
	// (unswept.go).
	unswept unsweptTenants
	// placementMu guards placements: the worker of each tenant on Citus,
	// by which heartbeat batches are grouped (tenantWorkers).
	placementMu sync.Mutex
	placements  map[uuid.UUID]tenantPlacement
	// registerGroups queues registrations by worker on Citus
	// (registergroup.go).
	registerGroups registerGroups
	// workerCalls counts the calls in flight to each Citus worker
	// (stall.go).
	workerCalls workerCalls
	// sweepProbes are the sweep's background probes of the Citus workers
	// (sweepprobe.go).
	sweepProbes sweepProbes
	// workerReads are the pools of the reads made on the Citus workers
	// themselves (workerreads.go).
	workerReads workerReads
	// epochState is the cluster's epoch on Citus (epoch.go).
	epochState epochState
	// sweepCalls sizes the calls of a tenant's sweep on Citus
	// (sweepsize.go).
	sweepCalls sweepCallSize
	// alertTenants are the tenants with alert work read so far, for the
	// alert reads per worker on Citus (alertworkers.go).
	alertTenants alertTenants
}

// onCitus reports whether the database has the citus extension: there the
// statements that would span tenants run once per tenant instead.
func (s *Store) onCitus(ctx context.Context) (bool, error) {
	s.engineMu.Lock()
	defer s.engineMu.Unlock()
	if s.engineKnown {
		return s.citus, nil
	}
	var citus bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return false, err
	}
	s.engineKnown, s.citus = true, citus
	return citus, nil
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.StatusCounter = (*Store)(nil)
	_ store.TenantRouter  = (*Store)(nil)
)

// DefaultMaxConns is the pool's size unless the URL's pool_max_conns says
// otherwise: room for the heartbeat batches in flight (DefaultFlushers)
// beside the monitor, the API's reads and the alert dispatcher.
const DefaultMaxConns = 2*DefaultFlushers + 4

// DefaultQueryExecMode is how statements run unless the URL's
// default_query_exec_mode says otherwise: each statement's description is
// asked once per connection and cached, and every execution is an unnamed
// statement in one round trip. Unlike the driver's default (named prepared
// statements, which live in one server session), it works through a pooler
// in transaction mode such as pgbouncer, where successive transactions of a
// connection may reach different server sessions. It costs the server a
// parse and plan per statement; on the heartbeat path that is within the
// noise (docs/performance.md).
const DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe

// Connect opens a pool to databaseURL and checks that the server answers.
// databaseURL may name several hosts (host1:5432,host2:5432) with
// target_session_attrs=read-write, so that a new connection after a failover
// reaches the new primary.
func Connect(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	return ConnectTraced(ctx, databaseURL, nil)
}

// ConnectTraced is Connect with a client span for every statement run
// inside a traced call (db.system.name postgresql, the statement's text
// without its parameters); a nil tp is Connect.
func ConnectTraced(ctx context.Context, databaseURL string, tp trace.TracerProvider) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
	if !strings.Contains(databaseURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = DefaultQueryExecMode
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "mcpd"
	}
	if tp != nil {
		cfg.ConnConfig.Tracer = queryTracer{tracer: tp.Tracer(tracerName)}
	}
	cfg.AfterConnect = pgsession.AfterConnect(cfg.AfterConnect)
	retireReadOnlySessions(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}

// New returns a Store over pool. Close stops its heartbeat batcher.
func New(pool *pgxpool.Pool, opts Options) *Store {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{pool: pool, clock: opts.Clock, logger: logger, batchTimeout: opts.BatchTimeout}
	tp := opts.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.tracer = tp.Tracer(tracerName)
	if s.batchTimeout <= 0 {
		s.batchTimeout = 5 * time.Second
	}
	s.workerCalls.stall = cmp.Or(max(opts.WorkerStall, 0), DefaultWorkerStall)
	s.workerCalls.onStall = s.probeWorkerInBackground
	s.sweepProbes.init()
	// Over a Unix socket the coordinator is on mcpd's host, and its
	// settings say nothing of how to reach the workers safely (TLS).
	s.workerReads.init(opts.CoordinatorReads || strings.HasPrefix(pool.Config().ConnConfig.Host, "/"))

	s.batcherOpts = opts
	s.batcher = newBatcher(s, opts.Flushers, opts.MaxBatch, opts.BatchWait, opts.BatchOverlap)
	return s
}

// Close stops the heartbeat batcher; heartbeats still queued fail with
// registry.ErrUnavailable. It waits for the registration calls in flight,
// ends the sweep's background probes of the Citus workers and closes its
// pools of reads on them. It does not close the pool.
func (s *Store) Close() {
	s.batcher.close()
	s.workerBatchersMu.Lock()
	s.batchersClosed = true
	workerBatchers := s.workerBatchers
	s.workerBatchersMu.Unlock()
	for _, b := range workerBatchers {
		b.close()
	}
	s.registerGroups.close()
	s.sweepProbes.close()
	s.workerReads.close()
}

// now is the timestamp parameter of a statement: nil lets the database use
// now().
func (s *Store) now() *time.Time {
	if s.clock == nil {
		return nil
	}
	t := s.clock.Now().UTC().Truncate(time.Microsecond)
	return &t
}

// setTenant scopes the transaction to a tenant on plain PostgreSQL: a
// set_config local to the transaction.
const setTenant = `SELECT set_config('auth.tenant_id', $1, true)`

// setTenantCitus scopes the transaction to a tenant on Citus:
// mcp_set_tenant (0019) runs SET LOCAL auth.tenant_id, which Citus carries
// to the workers (a set_config it does not), in an explicit transaction
// only; dearer than set_config, so plain PostgreSQL keeps that.
const setTenantCitus = `SELECT mcp_set_tenant($1::uuid)`

// setTenantForRead is setTenant for a read, which is also planned for its
// actual parameters: its optional filters ($n IS NULL OR column = $n) make a
// generic plan expect one row, and page through a tenant of 10,000 servers
// by sorting the rest of the tenant for every page (4.7 ms against 0.14 ms
// for the index range scan of a custom plan, measured with EXPLAIN ANALYZE).
const setTenantForRead = `SELECT set_config('auth.tenant_id', $1, true), set_config('plan_cache_mode', 'force_custom_plan', true)`

// setTenantForReadCitus is setTenantForRead on Citus.
const setTenantForReadCitus = `SELECT mcp_set_tenant($1::uuid), set_config('plan_cache_mode', 'force_custom_plan', true)`

// queryInTenant runs one read scoped to tenant by row-level security, in
// one round trip: the tenant's setting and the query are pipelined in one
// implicit transaction, to which the setting is local (on Citus an
// explicit one, BEGIN ... COMMIT, as SET LOCAL needs). It returns the rows
// that collect makes of the query's answer.
func queryInTenant[T any](ctx context.Context, s *Store, tenant uuid.UUID, collect pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	return queryInTenantAfter(ctx, s, "", nil, nil, tenant, collect, sql, args...)
}

// queryInTenantAt is queryInTenant that also reads the tenant's present
// position before the query, in the same round trip: the query's snapshot
// is later, so it reflects every event up to that position, and a watch
// from it misses nothing that the query's answer does not reflect.
func queryInTenantAt[T any](ctx context.Context, s *Store, tenant uuid.UUID, collect pgx.RowToFunc[T], sql string, args ...any) ([]T, registry.Position, error) {
	var epoch, pos int64
	// On Citus the position carries the cluster's epoch, read before it.
	cluster, err := s.citusEpoch(ctx)
	if err != nil {
		return nil, registry.Position{}, err
	}
	// The horizon before the tenant's settings: their plan_cache_mode
	// would make mcp_feed_horizon plan its query again on every call.
	out, err := queryInTenantAfter(ctx, s, horizonSQL, []any{tenant}, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(&epoch, &pos)
	}, tenant, collect, sql, args...)
	if err != nil {
		return nil, registry.Position{}, err
	}
	at := tenantPosition(epoch, pos)
	if cluster != 0 {
		at.Epoch = cluster
	}
	return out, at, nil
}

// queryInTenantAfter is queryInTenant with the statement first (none when
// empty) ahead of the tenant's setting in the same pipeline; readFirst
// reads its answer, or when nil it is run for its effect.
func queryInTenantAfter[T any](ctx context.Context, s *Store, first string, firstArgs []any, readFirst func(pgx.BatchResults) error,
	tenant uuid.UUID, collect pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	citus, err := s.onCitusFor(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var pb pgx.Batch
	set := setTenantForRead
	if citus {
		pb.Queue(`BEGIN READ ONLY`)
		set = setTenantForReadCitus
	}
	if first != "" {
		pb.Queue(first, firstArgs...)
	}
	pb.Queue(set, tenant.String())
	pb.Queue(sql, args...)
	if citus {
		pb.Queue(`COMMIT`)
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, translate(err)
	}
	defer c.Release()
	br := c.SendBatch(ctx, &pb)
	out, err := func() ([]T, error) {
		if citus {
			if _, err := br.Exec(); err != nil {
				return nil, err
			}
		}
		if first != "" {
			if readFirst != nil {
				if err := readFirst(br); err != nil {
					return nil, err
				}
			} else if _, err := br.Exec(); err != nil {
				return nil, err
			}
		}
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		out, err := pgx.CollectRows(rows, collect)
		if err != nil || !citus {
			return out, err
		}
		_, err = br.Exec()
		return out, err
	}()
	// Close ends the pipeline either way; the first error is the one told.
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		if citus {
			endFailedTransaction(ctx, c.Conn())
		}
		return nil, translate(err)
	}
	return out, nil
}

// rollbackTimeout bounds a ROLLBACK that mcpd sends to end a transaction
// (rollbackContext).
const rollbackTimeout = time.Second

// rollbackContext is the context of a ROLLBACK: sent even when ctx has
// ended, so that the session goes back to the pool out of its transaction,
// and bounded by rollbackTimeout, so that a server that stopped answering
// meanwhile (a host that hangs, a network that drops packets) does not
// hold the caller past it; the driver then closes the connection.
func rollbackContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
}

// endFailedTransaction rolls back the transaction that a pipeline left
// open on conn when one of its statements failed (the server skips the
// rest, COMMIT too), so that the pool takes the session back instead of
// closing it: on Citus each new session on the coordinator opens its own
// connections to the workers, and a worker that is down fails every read
// of its tenants. A connection that the driver closed is left to the pool.
func endFailedTransaction(ctx context.Context, conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	rctx, cancel := rollbackContext(ctx)
	defer cancel()
	_, _ = conn.Exec(rctx, `ROLLBACK`)
}

// rollbackBounded ends tx unless it committed (rollbackContext).
func rollbackBounded(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := rollbackContext(ctx)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// inTenant runs fn in a transaction scoped to tenant by row-level security.
func (s *Store) inTenant(ctx context.Context, tenant uuid.UUID, fn func(tx pgx.Tx) error) error {
	// Before the transaction takes a connection: the first call asks the
	// database on a connection of its own.
	citus, err := s.onCitusFor(ctx, tenant)
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return translate(err)
	}
	defer rollbackBounded(ctx, tx)
	set := setTenant
	if citus {
		set = setTenantCitus
	}
	if _, err := tx.Exec(ctx, set, tenant.String()); err != nil {
		return translate(err)
	}
	if err := fn(tx); err != nil {
		return translate(err)
	}
	return translate(tx.Commit(ctx))
}

// serverColumns is the column list every server read scans with scanServer.
const serverColumns = `server_id, tenant_id, module_name, version, supported_protocols,
	capability_advertisement, status, last_heartbeat_at, registered_at, deregistered_at, trace_id,
	remotes, description, title`

type rowScanner interface{ Scan(dest ...any) error }

// scanServer scans a row of serverColumns and then into extra.
func scanServer(row rowScanner, extra ...any) (registry.Server, error) {
	var (
		srv         registry.Server
		caps        []byte
		status      string
		traceID     *string
		remotes     []byte
		desc, title *string
	)
	dest := append([]any{&srv.ServerID, &srv.TenantID, &srv.ModuleName, &srv.Version, &srv.SupportedProtocols,
		&caps, &status, &srv.LastHeartbeatAt, &srv.RegisteredAt, &srv.DeregisteredAt, &traceID,
		&remotes, &desc, &title}, extra...)
	if err := row.Scan(dest...); err != nil {
		return registry.Server{}, err
	}
	srv.Status = registry.Status(status)
	if err := finishServer(&srv, caps, traceID, remotes, desc, title); err != nil {
		return registry.Server{}, err
	}
	return srv, nil
}

// decodeRemotes decodes the remotes column; none is an empty list.
func decodeRemotes(raw []byte) ([]registry.Remote, error) {
	out := []registry.Remote{}
	if len(raw) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode remotes: %w", err)
	}
	if out == nil {
		out = []registry.Remote{}
	}
	return out, nil
}

// encodeRemotes is the remotes column of a registration.
func encodeRemotes(r []registry.Remote) []byte {
	if len(r) == 0 {
		return []byte("[]")
	}
	b, _ := json.Marshal(r) // strings only: cannot fail
	return b
}

// nullIfEmpty is a nullable text parameter: NULL for "".
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// finishServer fills in what every read of a server row decodes the same
// way: the nullable capabilities, trace id, description and title, the
// remotes, and UTC times.
func finishServer(srv *registry.Server, caps []byte, traceID *string, remotes []byte, desc, title *string) error {
	var err error
	if srv.Remotes, err = decodeRemotes(remotes); err != nil {
		return err
	}
	if desc != nil {
		srv.Description = *desc
	}
	if title != nil {
		srv.Title = *title
	}
	if caps != nil {
		srv.CapabilityAdvertisement = json.RawMessage(caps)
	}
	if traceID != nil {
		srv.TraceID = strings.TrimSpace(*traceID)
	}
	srv.LastHeartbeatAt = srv.LastHeartbeatAt.UTC()
	srv.RegisteredAt = srv.RegisteredAt.UTC()
	if srv.DeregisteredAt != nil {
		t := srv.DeregisteredAt.UTC()
		srv.DeregisteredAt = &t
	}
	return nil
}

// scanEvent scans an event's columns (eventRow) from row.
func scanEvent(row rowScanner) (registry.Event, error) {
	var r eventRow
	if err := row.Scan(r.appendDest(make([]any, 0, 11))...); err != nil {
		return registry.Event{}, err
	}
	ev, _, err := r.event()
	return ev, err
}

// eventRow is where every read scans an audit row, whatever else the row
// holds: seq, event_id, tenant_id, kind, server_id, module_name,
// from_status, to_status, trace_id, occurred_at and body, in that order,
// each nullable, since some functions return rows that carry no event (a
// feed's horizon, a sweep's window).
type eventRow struct {
	seq                           *int64
	eventID, tenant, server       *uuid.UUID
	kind, module, from, to, trace *string
	occurred                      *time.Time
	body                          []byte
}

// appendDest appends the destinations of the event's columns to d, in order.
func (r *eventRow) appendDest(d []any) []any {
	return r.appendDestNoSeq(append(d, &r.seq))
}

// appendDestNoSeq appends the destinations of the event's columns but seq, for
// the functions that do not return it.
func (r *eventRow) appendDestNoSeq(d []any) []any {
	return append(d, &r.eventID, &r.tenant, &r.kind, &r.server, &r.module, &r.from, &r.to, &r.trace,
		&r.occurred, &r.body)
}

// event decodes the row's event, the same way for every read: UTC time,
// nil from status for none, the body with its lists never nil. ok is
// false, with no error, when the row carries no event (event_id NULL).
func (r *eventRow) event() (ev registry.Event, ok bool, err error) {
	if r.eventID == nil {
		return registry.Event{}, false, nil
	}
	if r.tenant == nil || r.kind == nil || r.server == nil || r.module == nil || r.to == nil || r.occurred == nil {
		return registry.Event{}, false, fmt.Errorf("audit row %s: a required column is null", *r.eventID)
	}
	ev = registry.Event{EventID: *r.eventID, TenantID: *r.tenant, Kind: registry.EventKind(*r.kind),
		ServerID: *r.server, ModuleName: *r.module, ToStatus: registry.Status(*r.to), OccurredAt: r.occurred.UTC()}
	if r.seq != nil {
		ev.Seq = *r.seq
	}
	if r.from != nil {
		st := registry.Status(*r.from)
		ev.FromStatus = &st
	}
	if r.trace != nil {
		ev.TraceID = strings.TrimSpace(*r.trace)
	}
	if err := json.Unmarshal(r.body, &ev.Body); err != nil {
		return registry.Event{}, false, fmt.Errorf("decode event body: %w", err)
	}
	if ev.Body.SkillsAffected == nil {
		ev.Body.SkillsAffected = []string{}
	}
	if ev.Body.SupportedProtocols == nil {
		ev.Body.SupportedProtocols = []string{} // a body that names none
	}
	return ev, true, nil
}

// Ping reports whether the database answers, its schema is the one this
// build expects, and it commits a write. A read-only database (a standby,
// or default_transaction_read_only) is registry.ErrUnavailable with cause
// ErrReadOnly. Otherwise Ping writes an empty transactional WAL message
// (pg_logical_emit_message, prefix mcpd.ready: no table, a few dozen bytes
// of WAL), so that its commit waits, like every write's, for a synchronous
// standby when there is one: a primary that cannot commit is not ready
// either (the caller's deadline bounds the wait).
func (s *Store) Ping(ctx context.Context) error {
	if err := CheckSchema(ctx, s.pool); err != nil {
		return translate(err)
	}
	var readOnly bool
	if err := s.pool.QueryRow(ctx, `
SELECT CASE WHEN current_setting('transaction_read_only')::boolean OR pg_is_in_recovery() THEN NULL
            ELSE pg_logical_emit_message(true, 'mcpd.ready', '') END IS NULL`).Scan(&readOnly); err != nil {
		return translate(err)
	}
	if readOnly {
		return fmt.Errorf("%w: %w", registry.ErrUnavailable, ErrReadOnly)
	}
	return nil
}

// CountByStatus counts servers per status across every tenant.
func (s *Store) CountByStatus(ctx context.Context) (map[registry.Status]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, servers FROM mcp_status_counts()`)
	if err != nil {
		return nil, translate(err)
	}
	counts := make(map[registry.Status]int64, len(registry.Statuses))
	for _, st := range registry.Statuses {
		counts[st] = 0
	}
	var (
		status string
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[registry.Status(status)] = n
		return nil
	})
	return counts, translate(err)
}
