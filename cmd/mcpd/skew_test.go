package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// offsetClock is the real clock read as a host whose wall clock is off by
// offset would read it; timers and tickers are the real ones.
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return c.Clock.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// startSkewedReplica runs, in this process, an mcpd wired as pkg/daemon
// wires it for PostgreSQL (the store without a clock of its own, so the
// database's now() decides every status), whose process clock is clock: the
// monitor's and the token verifier's. (daemon.Options.Clock cannot model
// this: it is also given to the store, which would then write the skewed
// time into the rows, as a skewed database would.) Stopped in t.Cleanup.
func startSkewedReplica(t *testing.T, databaseURL string, secret []byte, clock clockwork.Clock) *proc {
	t.Helper()
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := pgstore.Connect(ctx, databaseURL)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	store := pgstore.New(pool, pgstore.Options{Logger: logger})
	metrics := api.NewMetrics(api.MetricsOptions{Counter: store, Logger: logger})
	sink := metrics.Sink(lifecycle.LogSink{Logger: logger})
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, Sink: sink, Logger: logger,
		HeartbeatInterval: e2eInterval})
	mon := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: store, Sink: sink, Logger: logger, Clock: clock,
		HeartbeatInterval: e2eInterval, Period: e2ePeriod, Observe: metrics.ObserveSweep})
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	handler := api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier, Logger: logger, Metrics: metrics,
		Pinger: store, RequestTimeout: e2eRequestTimeout})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if err := mon.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), pollCap)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shut down the skewed replica: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		cancel()
		if err := mon.Stop(context.Background()); err != nil {
			t.Errorf("stop the skewed replica's monitor: %v", err)
		}
		store.Close()
		pool.Close()
		if t.Failed() {
			t.Logf("skewed replica log:\n%s", logs.String())
		}
	})
	return &proc{addr: ln.Addr().String(), secret: secret, stderr: logs, done: make(chan struct{})}
}

// TestClockSkewedReplica runs a replica whose wall clock is a minute off
// beside a normal one: a server that heartbeats through both is never
// moved, and a silent one (registered through either) is degraded at 2I
// (unless the sweep came late) and unhealthy at 3I of silence by the
// database's clock.
func TestClockSkewedReplica(t *testing.T) {
	// Not parallel: the bounds below catch a misreading of the clock by
	// the offset (a minute), not a starved machine. The tolerance covers
	// sweeps that come late on a loaded machine, and the blind window
	// (--blind-after) that such a late sweep opens, during which nothing
	// is due: a sixth of the offset. (Fifteen intervals, 3 s, were too
	// few on Citus in a 2-core CI run: three sweeps in a row ran out of
	// their second while the cluster's new connections started, and a
	// silent server was degraded 4.6 s after its last heartbeat.)
	for _, offset := range []time.Duration{time.Minute, -time.Minute} {
		tolerance := offset.Abs() / 6
		t.Run(fmt.Sprintf("offset %s", offset), func(t *testing.T) {
			db := pgtest.NewDB(t)
			normal := startMcpd(t, db.AppURL)
			skewed := startSkewedReplica(t, db.AppURL, normal.secret, offsetClock{clockwork.NewRealClock(), offset})
			tenant := uuid.New()
			cn, cs := normal.client(t, tenant), skewed.client(t, tenant)
			ctx := context.Background()
			testwait.Until(t, "skewed replica ready", pollCap, func() bool { return cs.Readyz(ctx) == nil })

			// silent-000 through the skewed replica, silent-001 through
			// the normal one; alive-000 heartbeats through both.
			silent := registerN(t, []*client.Client{cs, cn}, "silent", 2, 1)
			alive := registerN(t, []*client.Client{cs}, "alive", 1, 1)
			bs := startBeater(t, cs, alive, e2eInterval/4)
			bn := startBeater(t, cn, alive, e2eInterval/4)
			testwait.Until(t, "the silent servers unhealthy", pollCap, func() bool {
				var n int
				err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE server_id = ANY($1) AND status = 'unhealthy'`,
					silent).Scan(&n)
				return err == nil && n == len(silent)
			})
			// Two more intervals of heartbeats for alive-000.
			more := time.Now()
			testwait.Until(t, "two more intervals", pollCap, func() bool { return time.Since(more) > 2*e2eInterval })
			bs.halt()
			bn.halt()
			for _, b := range []*beater{bs, bn} {
				if _, bad := b.report(); len(bad) > 0 {
					t.Fatalf("heartbeats of alive-000: %s", bad[0])
				}
			}

			st := readState(t, db.Admin)
			assertConsistent(t, st, nil)
			// alive-000 is never moved while a heartbeat of it is answered
			// in time: a mark after 2I (3I) in which neither beater had one
			// answered is the loaded machine's (its beats came late), not a
			// misread clock's, which would mark it while beats flow.
			if got := trail(st.events[alive[0]]); got != "registered" {
				for _, e := range st.events[alive[0]][1:] {
					if e.kind != registry.KindDegraded && e.kind != registry.KindUnhealthy {
						continue
					}
					due := registry.DegradedAfter(e2eInterval)
					if e.kind == registry.KindUnhealthy {
						due = registry.UnhealthyAfter(e2eInterval)
					}
					if bs.sentWithin(alive[0], e.occurred, due) || bn.sentWithin(alive[0], e.occurred, due) {
						t.Fatalf("alive-000 heartbeated through both replicas, answered within %s of its %s mark; its trail is %q",
							due, e.kind, got)
					}
				}
				t.Logf("alive-000's trail is %q: its heartbeats came late on a loaded machine (none answered within the lag of a mark)", got)
			}
			var lags []string
			for i, id := range silent {
				evs := st.events[id]
				// Through degraded unless the sweep came an interval late
				// (API.md: the status follows the lag at the sweep).
				if tr := trail(evs); tr != "registered degraded unhealthy" && tr != "registered unhealthy" {
					t.Fatalf("silent-%03d: trail %q, want registered [degraded] unhealthy", i, tr)
				}
				last := evs[0].occurred // the registration is the last heartbeat
				for _, e := range evs[1:] {
					lag := e.occurred.Sub(last)
					due := registry.DegradedAfter(e2eInterval)
					if e.kind == registry.KindUnhealthy {
						due = registry.UnhealthyAfter(e2eInterval)
					}
					if lag < due || lag > due+tolerance {
						t.Fatalf("silent-%03d %s after %s of silence by the database's clock, want %s to %s",
							i, e.kind, lag, due, due+tolerance)
					}
					lags = append(lags, fmt.Sprintf("%s %s", trail([]auditEvent{e}), lag.Round(time.Millisecond)))
				}
			}
			assertNoPanic(t, "the skewed replica", skewed.stderr.String())
			assertNoPanic(t, "the normal replica", normal.stderr.String())
			t.Logf("FIGURE clock skew %s: 0 false transitions (alive-000 through both replicas), 0 lost; silent "+
				"servers (via skewed, via normal) by the database's clock: %v (due 2I = %s, 3I = %s)",
				offset, lags, registry.DegradedAfter(e2eInterval), registry.UnhealthyAfter(e2eInterval))
		})
	}
}
