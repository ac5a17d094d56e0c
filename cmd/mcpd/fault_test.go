package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// Fault injection against the real binary on PostgreSQL: the database goes
// away, mcpd is SIGKILLed, a replica dies mid-sweep, the database is slow.
// Intervals are compressed (startMcpd: I = 200ms, monitor period 100ms).

// beater heartbeats a set of servers in the background, each every period,
// and counts the outcomes by phase (before, during and after a fault).
type beater struct {
	c      *client.Client
	period time.Duration
	phase  atomic.Int32

	mu       sync.Mutex
	outcomes [3]map[string]int
	bad      []string                // answers the contract does not allow
	lastOK   map[uuid.UUID]time.Time // of each server's last acknowledged heartbeat
	tries    map[uuid.UUID][]beatTry // every heartbeat sent, in order

	stop chan struct{}
	wg   sync.WaitGroup
}

// beatTry is one heartbeat a beater sent: when the call started and when
// its answer (any) came.
type beatTry struct{ start, end time.Time }

// beaterMaxRun bounds a beater's life whatever the test does.
const beaterMaxRun = 10 * time.Minute

func startBeater(t *testing.T, c *client.Client, ids []uuid.UUID, period time.Duration) *beater {
	b := &beater{c: c, period: period, lastOK: map[uuid.UUID]time.Time{}, tries: map[uuid.UUID][]beatTry{},
		stop: make(chan struct{})}
	for i := range b.outcomes {
		b.outcomes[i] = map[string]int{}
	}
	for _, id := range ids {
		b.wg.Go(func() { b.run(id) })
	}
	t.Cleanup(b.halt)
	return b
}

func (b *beater) run(id uuid.UUID) {
	ticker := time.NewTicker(b.period)
	defer ticker.Stop()
	for range int(beaterMaxRun / b.period) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// A heartbeat counts in the phase it was sent in, not the one its
		// answer came in.
		phase := b.phase.Load()
		start := time.Now()
		srv, err := b.c.Heartbeat(ctx, id)
		end := time.Now()
		cancel()
		b.mu.Lock()
		b.outcomes[phase][statusOf(err)]++
		b.tries[id] = append(b.tries[id], beatTry{start, end})
		switch {
		case err == nil && srv.Status == registry.StatusHealthy:
			b.lastOK[id] = time.Now()
		case err == nil:
			b.bad = append(b.bad, fmt.Sprintf("heartbeat answered with status %s", srv.Status))
		case !isUnavailable(err):
			b.bad = append(b.bad, fmt.Sprintf("phase %d: %v", phase, err))
		}
		b.mu.Unlock()
		select {
		case <-b.stop:
			return
		case <-ticker.C:
		}
	}
}

// halt stops every heartbeat loop and waits for them; idempotent.
func (b *beater) halt() {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	b.wg.Wait()
}

// allOKSince reports whether every server had a heartbeat acknowledged
// after t0.
func (b *beater) allOKSince(ids []uuid.UUID, t0 time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		if !b.lastOK[id].After(t0) {
			return false
		}
	}
	return true
}

// sentWithin reports whether a heartbeat of id was sent after at-d and
// answered (whatever the answer) before at: a registry that marks the
// server at at for d of silence did not hear from it in time, or did not
// count a heartbeat that failed only because the registry could not record
// it. Without one, the server itself was silent that long (its heartbeats
// were late on a loaded machine) and the mark is the contract's.
func (b *beater) sentWithin(id uuid.UUID, at time.Time, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, tr := range b.tries[id] {
		if tr.start.After(at.Add(-d)) && tr.end.Before(at) {
			return true
		}
	}
	return false
}

// marks counts the servers of ids moved away from healthy by an event after
// baseline, in two kinds: false, when the beater had sent the server a
// heartbeat within the lag that the event's status needs (2I, 3I of the
// heartbeat interval interval), and late, when it had not (its heartbeats
// were late).
type marks struct {
	degraded, unhealthy         int // falsely
	lateDegraded, lateUnhealthy int
}

func (b *beater) marks(st dbState, ids []uuid.UUID, baseline int64, interval time.Duration) marks {
	var m marks
	for _, id := range ids {
		var deg, unh, lateDeg, lateUnh bool
		for _, e := range st.events[id] {
			if e.pos <= baseline || e.kind != registry.KindDegraded && e.kind != registry.KindUnhealthy {
				continue
			}
			due := registry.DegradedAfter(interval)
			if e.kind == registry.KindUnhealthy {
				due = registry.UnhealthyAfter(interval)
			}
			heard := b.sentWithin(id, e.occurred, due)
			switch {
			case e.kind == registry.KindDegraded && heard:
				deg = true
			case e.kind == registry.KindDegraded:
				lateDeg = true
			case heard:
				unh = true
			default:
				lateUnh = true
			}
		}
		m.degraded += btoi(deg)
		m.unhealthy += btoi(unh)
		m.lateDegraded += btoi(lateDeg)
		m.lateUnhealthy += btoi(lateUnh)
	}
	return m
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (b *beater) report() ([3]map[string]int, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out [3]map[string]int
	for i, m := range b.outcomes {
		out[i] = map[string]int{}
		for k, v := range m {
			out[i][k] = v
		}
	}
	return out, slices.Clone(b.bad)
}

// registerN registers n servers named prefix-00, prefix-01… with skills
// skills each, spread over the clients, and returns their ids in order.
func registerN(t *testing.T, clients []*client.Client, prefix string, n, skills int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range n {
		req := api.RegisterRequest{ModuleName: fmt.Sprintf("%s-%03d", prefix, i), Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}}
		for k := range skills {
			req.Skills = append(req.Skills, registry.SkillInfo{Name: fmt.Sprintf("skill-%d", k)})
		}
		ids[i] = registerRetrying(t, clients[i%len(clients)], req)
	}
	return ids
}

// registerRetrying registers req, again after a 503 (retryUnavailable):
// registration is idempotent.
func registerRetrying(t *testing.T, c *client.Client, req api.RegisterRequest) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	retryUnavailable(t, "register "+req.ModuleName, time.Minute, func() error {
		srv, _, err := c.Register(context.Background(), req, "")
		id = srv.ServerID
		return err
	})
	return id
}

// retryUnavailable calls call until it succeeds, within limit, again after
// each 503: on a loaded machine the store's deadline may pass, which mcpd
// answers as it should (503, retry later). Any other error fails t.
func retryUnavailable(t *testing.T, what string, limit time.Duration, call func() error) {
	t.Helper()
	var lastErr error
	testwait.Until(t, what, limit, func() bool {
		err := call()
		var prob *api.Problem
		if err != nil && (!errors.As(err, &prob) || prob.Status != http.StatusServiceUnavailable) {
			t.Fatalf("%s: %v", what, err)
		}
		if err != nil {
			lastErr = err
		}
		return err == nil
	})
	if lastErr != nil {
		t.Logf("%s: answered after a 503 (%v)", what, lastErr)
	}
}

// assertNoFalseUnhealthy fails t when a server that kept heartbeating
// through a database outage was moved away from healthy: with blind-window
// protection the registry's blindness must not be charged to the servers.
// A server whose own heartbeats were late (m.late…, a loaded machine) is
// not one that kept heartbeating.
func assertNoFalseUnhealthy(t *testing.T, m marks, servers int) {
	t.Helper()
	if m.degraded > 0 || m.unhealthy > 0 {
		t.Fatalf("after the outage %d of %d heartbeating servers were marked degraded and %d unhealthy; want none",
			m.degraded, servers, m.unhealthy)
	}
}

// TestDatabaseOutageWhileHeartbeating stops PostgreSQL for longer than
// three intervals while servers keep heartbeating, once an interval as
// real ones do: mcpd stays up, answers 503 with Retry-After (also /readyz),
// and serves again afterwards. The figure: how many of the heartbeating
// servers were marked degraded or unhealthy because of the outage, with
// blind-window protection (the default) and without (--blind-after -1s).
func TestDatabaseOutageWhileHeartbeating(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"protected", nil},
		{"unprotected", []string{"--blind-after", "-1s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			databaseOutage(t, c.name == "protected", c.args...)
		})
	}
}

func databaseOutage(t *testing.T, protected bool, args ...string) {
	const servers = 20
	outage := 6 * e2eInterval
	if longRun() {
		outage = 50 * e2eInterval
	}
	cluster := pgtest.NewCluster(t)
	db := cluster.NewDB(t)
	p := startMcpd(t, db.AppURL, args...)
	c := p.client(t, uuid.New())
	ctx := context.Background()
	ids := registerN(t, []*client.Client{c}, "outage", servers, 1)
	b := startBeater(t, c, ids, e2eInterval)
	testwait.Until(t, "every server heartbeated", pollCap, func() bool { return b.allOKSince(ids, time.Time{}) })

	// What the outage does is what comes after this.
	var baseline int64
	if err := db.Admin.QueryRow(ctx, `SELECT COALESCE(max(position), 0) FROM mcp_audit_events`).Scan(&baseline); err != nil {
		t.Fatal(err)
	}
	b.phase.Store(1)
	stopAt := time.Now()
	cluster.Stop(t)
	stopped := time.Now()
	testwait.Until(t, "heartbeats answered 503 with Retry-After", pollCap, func() bool {
		out, _ := b.report()
		return out[1]["503"] > 0
	})
	// Keep the database down for the outage, checking mcpd all along.
	testwait.Throughout(t, outage-time.Since(stopped), func() {
		if err := c.Readyz(ctx); !isUnavailable(err) {
			t.Fatalf("readyz while the database is down: %v", err)
		}
		if err := c.Healthz(ctx); err != nil {
			t.Fatalf("healthz while the database is down: %v", err)
		}
		if !p.running() {
			t.Fatalf("mcpd exited during the outage: %v", p.err)
		}
	})
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "outage-new", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, ""); !isUnavailable(err) {
		t.Fatalf("register while the database is down: %v", err)
	}
	cluster.Start(t)
	started := time.Now()
	down := started.Sub(stopAt)
	b.phase.Store(2)
	testwait.Until(t, "ready again", pollCap, func() bool { return c.Readyz(ctx) == nil })
	ready := time.Since(started)
	testwait.Until(t, "every server heartbeated again", pollCap, func() bool { return b.allOKSince(ids, started) })
	recovered := time.Since(started)
	// Five more intervals of heartbeats: time for the monitor to mark
	// anyone it would mark.
	settle := time.Now()
	testwait.Until(t, "five intervals after recovery", pollCap, func() bool {
		return time.Since(settle) > 5*e2eInterval || !p.running()
	})
	b.halt()
	if !p.running() {
		t.Fatalf("mcpd exited: %v", p.err)
	}
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "outage-new", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, ""); err != nil {
		t.Fatalf("register after the outage: %v", err)
	}

	out, bad := b.report()
	if len(bad) > 0 {
		t.Fatalf("%d answers outside the contract, first: %s", len(bad), bad[0])
	}
	st := readState(t, db.Admin)
	assertConsistent(t, st, nil)
	m := b.marks(st, ids, baseline, e2eInterval)
	metrics := get(t, "http://"+p.addr+"/metrics")
	mode := "with blind-window protection"
	if !protected {
		mode = "without blind-window protection (--blind-after -1s)"
	}
	t.Logf("FIGURE outage %s: database down %s (> 3I = %s); mcpd up throughout; heartbeats during the outage %v; "+
		"ready %s and every server heartbeated %s after the restart; falsely degraded %d/%d, falsely unhealthy %d/%d "+
		"heartbeating servers (marked after their own late heartbeats: degraded %d, unhealthy %d); %s",
		mode, down.Round(time.Millisecond), 3*e2eInterval, out[1], ready.Round(time.Millisecond), recovered.Round(time.Millisecond),
		m.degraded, servers, m.unhealthy, servers, m.lateDegraded, m.lateUnhealthy,
		strings.Join(grepLinesPrefix(metrics, "mcpd_blind_"), ", "))
	if out[1]["503"] == 0 || out[2]["ok"] == 0 {
		t.Fatalf("outcomes %v", out)
	}
	assertNoPanic(t, "mcpd", p.stderr.String())
	if protected {
		assertNoFalseUnhealthy(t, m, servers)
	}
}

func grepLinesPrefix(text, prefix string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestSIGKILLUnderLoad kills mcpd with SIGKILL while clients register and
// heartbeat: after a restart no row is partial (every server has its
// registration event and its whole skill set), every registration answered
// 2xx is there, and the monitor goes on in the new process.
func TestSIGKILLUnderLoad(t *testing.T) {
	t.Parallel()
	const (
		workers   = 6
		skillsPer = 4
	)
	perWorker, killAfter := 40, 60
	if longRun() {
		perWorker, killAfter = 400, 1200
	}
	db := pgtest.NewDB(t)
	a := startMcpd(t, db.AppURL)
	tenant := uuid.New()
	ca := a.client(t, tenant)
	ctx := context.Background()

	// The canary heartbeats until the kill: healthy when the first process
	// dies, it must be marked by the second.
	canary := registerN(t, []*client.Client{ca}, "canary", 1, skillsPer)[0]
	canaryBeat := startBeater(t, ca, []uuid.UUID{canary}, e2eInterval/4)

	var (
		mu     sync.Mutex
		acked  = map[uuid.UUID]string{}
		faults []string
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			var mine []uuid.UUID
			for i := range perWorker {
				req := api.RegisterRequest{ModuleName: fmt.Sprintf("kill-%d-%03d", w, i), Version: "1.0.0",
					SupportedProtocols: []string{"2025-06-18"}}
				for k := range skillsPer {
					req.Skills = append(req.Skills, registry.SkillInfo{Name: fmt.Sprintf("skill-%d", k), Description: "d"})
				}
				srv, _, err := ca.Register(ctx, req, "")
				if err != nil {
					if statusOf(err) != "transport" {
						mu.Lock()
						faults = append(faults, err.Error())
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				acked[srv.ServerID] = req.ModuleName
				mu.Unlock()
				mine = append(mine, srv.ServerID)
				for _, id := range mine[max(0, len(mine)-3):] {
					if _, err := ca.Heartbeat(ctx, id); err != nil {
						if statusOf(err) != "transport" {
							mu.Lock()
							faults = append(faults, err.Error())
							mu.Unlock()
						}
						return
					}
				}
			}
		})
	}
	testwait.Until(t, fmt.Sprintf("%d registrations acknowledged", killAfter), time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= killAfter
	})
	a.kill(t)
	// The canary as the first process left it: nobody sweeps until the
	// second one starts, however long that takes on a loaded machine.
	var (
		killedAt     time.Time
		canaryAtKill string
	)
	if err := db.Admin.QueryRow(ctx, `SELECT now(), (SELECT status FROM mcp_servers WHERE server_id = $1)`, canary).
		Scan(&killedAt, &canaryAtKill); err != nil {
		t.Fatal(err)
	}
	// A loaded machine may have held a heartbeat of the canary past 3I
	// (Citus, six writers beside it): then it heartbeats once through the
	// second process, which must mark it unhealthy after that.
	canaryLate := canaryAtKill == string(registry.StatusUnhealthy)
	wg.Wait()
	canaryBeat.halt()
	if len(faults) > 0 {
		t.Fatalf("%d calls answered outside the contract before the kill, first: %s", len(faults), faults[0])
	}

	restart := time.Now()
	b := startMcpd(t, db.AppURL)
	cb := b.client(t, tenant)
	testwait.Until(t, "second process ready", pollCap, func() bool { return cb.Readyz(ctx) == nil })

	st := readState(t, db.Admin)
	assertConsistent(t, st, func(string) int { return skillsPer })
	for id, module := range acked {
		if _, ok := st.servers[id]; !ok {
			t.Fatalf("acknowledged registration of %s (%s) lost", module, id)
		}
		if n := st.count(id, registry.KindRegistered); n != 1 {
			t.Fatalf("%s has %d registration events", module, n)
		}
	}
	rows := len(st.servers) - 1 // the canary
	lastBeat := killedAt
	if canaryLate {
		t.Logf("the canary was unhealthy when the first process died (a heartbeat came late): it heartbeats through the second")
		if err := db.Admin.QueryRow(ctx, `SELECT now()`).Scan(&lastBeat); err != nil {
			t.Fatal(err)
		}
		if _, err := cb.Heartbeat(ctx, canary); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, "the canary unhealthy under the second process", pollCap, func() bool {
		srv, err := cb.Server(ctx, canary)
		return err == nil && srv.Status == registry.StatusUnhealthy
	})
	toUnhealthy := time.Since(restart)
	testwait.Until(t, "every silent server unhealthy", pollCap, func() bool {
		var n int
		err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE status <> 'unhealthy'`).Scan(&n)
		return err == nil && n == 0
	})
	st = readState(t, db.Admin)
	assertConsistent(t, st, func(string) int { return skillsPer })
	evs := st.events[canary]
	if last := evs[len(evs)-1]; last.kind != registry.KindUnhealthy || !last.occurred.After(lastBeat) {
		t.Fatalf("canary's last event %s at %s, the kill at %s, its last heartbeat at %s", last.kind, last.occurred, killedAt, lastBeat)
	}
	assertNoPanic(t, "the killed mcpd", a.stderr.String())
	assertNoPanic(t, "the restarted mcpd", b.stderr.String())
	t.Logf("FIGURE SIGKILL: %d workers, killed after %d acknowledged registrations; after the restart %d rows "+
		"(%d committed but unanswered), 0 partial, 0 lost; canary unhealthy %s after the restart (3I = %s)",
		workers, len(acked), rows, rows-len(acked), toUnhealthy.Round(time.Millisecond), 3*e2eInterval)
}

// TestReplicaKilledMidSweep runs three mcpd on one database; servers stop
// heartbeating, and one replica is SIGKILLed as soon as the first
// transition is written: every transition still happens, audited exactly
// once.
func TestReplicaKilledMidSweep(t *testing.T) {
	t.Parallel()
	n := 30
	if longRun() {
		n = 300
	}
	db := pgtest.NewDB(t)
	tenant := uuid.New()
	var reps []*proc
	var clients []*client.Client
	for range 3 {
		p := startMcpd(t, db.AppURL)
		reps = append(reps, p)
		clients = append(clients, p.client(t, tenant))
	}
	ctx := context.Background()
	ids := registerN(t, clients, "replica", n, 2)
	// Three intervals of heartbeats spread over the replicas, each round
	// sent by workers so that it takes well under an interval on a quiet
	// machine. The silence starts once every server is healthy, as one
	// snapshot of the database reads it together with the last event so
	// far: on a loaded machine a server may lag during registration or
	// between two slow rounds and be marked, so rounds go on (bounded)
	// until a round leaves them all healthy.
	round := func(r int) {
		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		const workers = 32
		for w := range workers {
			wg.Go(func() {
				for i := w; i < len(ids); i += workers {
					if _, err := clients[(i+r)%3].Heartbeat(ctx, ids[i]); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	const maxRounds = 200
	start := time.Now()
	var (
		silent     time.Time
		baseline   int64 // what the silence does is what comes after this event
		notHealthy int
		rounds     int
	)
	for {
		round(rounds)
		rounds++
		if time.Since(start) < 3*e2eInterval {
			continue
		}
		silent = time.Now()
		if err := db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM mcp_servers WHERE status <> 'healthy'),
       (SELECT COALESCE(max(position), 0) FROM mcp_audit_events)`).Scan(&notHealthy, &baseline); err != nil {
			t.Fatal(err)
		}
		if notHealthy == 0 {
			break
		}
		if rounds >= maxRounds || time.Since(start) > pollCap {
			t.Fatalf("%d servers still not healthy after %d heartbeat rounds in %s", notHealthy, rounds,
				time.Since(start).Round(time.Millisecond))
		}
	}
	var transitions int
	testwait.Until(t, "the first transition of the silence", pollCap, func() bool {
		err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_audit_events WHERE position > $1`, baseline).Scan(&transitions)
		return err == nil && transitions > 0
	})
	reps[1].kill(t)
	testwait.Until(t, "every server unhealthy", pollCap, func() bool {
		var left int
		err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE status <> 'unhealthy'`).Scan(&left)
		return err == nil && left == 0
	})
	allUnhealthy := time.Since(silent)
	st := readState(t, db.Admin)
	assertConsistent(t, st, func(string) int { return 2 })
	straight := 0
	counts := map[registry.EventKind]int{}
	for i, id := range ids {
		var after []auditEvent
		for _, e := range st.events[id] {
			if e.pos > baseline {
				after = append(after, e)
				counts[e.kind]++
			}
		}
		switch trail(after) {
		case "degraded unhealthy":
		case "unhealthy":
			straight++
		default:
			t.Fatalf("server %d: the silence wrote %q, want [degraded] unhealthy, each once (whole trail %q)",
				i, trail(after), trail(st.events[id]))
		}
	}
	var available int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_skills WHERE available OR unavailable_reason <> 'server_unhealthy'`).
		Scan(&available); err != nil || available != 0 {
		t.Fatalf("%d skills not taken away by the cascade (%v)", available, err)
	}
	for i, p := range reps {
		assertNoPanic(t, fmt.Sprintf("replica %d", i), p.stderr.String())
	}
	t.Logf("FIGURE replicas: 3 replicas, replica 1 SIGKILLed after %d transition(s) of the silence were written; "+
		"%d servers, the silence wrote degraded %d, unhealthy %d, other 0 (%d went straight to unhealthy); all "+
		"unhealthy %s after the last heartbeat (3I = %s); %d heartbeat rounds before the silence",
		transitions, n, counts[registry.KindDegraded], counts[registry.KindUnhealthy], straight,
		allUnhealthy.Round(time.Millisecond), 3*e2eInterval, rounds)
}

// timedCall is one call made while the database is slow.
type timedCall struct {
	name    string
	took    time.Duration
	err     error
	outcome string
}

// TestSlowDatabaseBoundedByDeadline holds locks on mcp_servers from an
// admin transaction: each call is bounded by --request-timeout and answers
// 503 with Retry-After, never hangs and never 500; afterwards calls
// succeed.
func TestSlowDatabaseBoundedByDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	// What a call may take beyond its deadline: the answer, a loaded
	// machine.
	const slack = 1500 * time.Millisecond
	db := pgtest.NewDB(t)
	p := startMcpd(t, db.AppURL, "--request-timeout", timeout.String())
	tenant := uuid.New()
	c := p.client(t, tenant)
	ctx := context.Background()
	ids := registerN(t, []*client.Client{c}, "slow", 4, 1)

	calls := map[string]func() error{
		"heartbeat":  func() error { _, err := c.Heartbeat(ctx, ids[0]); return err },
		"deregister": func() error { _, err := c.Deregister(ctx, ids[1]); return err },
		"get server": func() error { _, err := c.Server(ctx, ids[2]); return err },
		"list":       func() error { _, err := c.Servers(ctx, client.ListServersParams{}); return err },
		"re-register": func() error {
			_, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "slow-000", Version: "1.0.1", SupportedProtocols: []string{"2025-06-18"}}, "")
			return err
		},
		"register": func() error {
			_, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "slow-new", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, "")
			return err
		},
	}
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	sort.Strings(names)
	const perCall = 3
	run := func() []timedCall {
		var mu sync.Mutex
		var out []timedCall
		var wg sync.WaitGroup
		for _, name := range names {
			for range perCall {
				wg.Go(func() {
					t0 := time.Now()
					err := calls[name]()
					mu.Lock()
					out = append(out, timedCall{name: name, took: time.Since(t0), err: err, outcome: statusOf(err)})
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		return out
	}
	lock := func(sql string, args ...any) pgx.Tx {
		tx, err := db.Admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			_ = tx.Rollback(ctx)
			t.Fatal(err)
		}
		return tx
	}

	// Table lock: every call that touches mcp_servers waits on it.
	tx := lock(`LOCK TABLE mcp_servers IN ACCESS EXCLUSIVE MODE`)
	t0 := time.Now()
	if err := c.Healthz(ctx); err != nil {
		t.Fatalf("healthz while the table is locked: %v", err)
	}
	healthz := time.Since(t0)
	results := run()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for _, r := range results {
		if !isUnavailable(r.err) {
			t.Fatalf("%s while the table is locked: %v, want 503 with Retry-After", r.name, r.err)
		}
		if r.took < timeout/2 || r.took > timeout+slack {
			t.Fatalf("%s took %s with a %s request timeout", r.name, r.took, timeout)
		}
		worst = max(worst, r.took)
	}

	// Row lock on one server: its heartbeats wait, the others'...
	// With its tenant: Citus locks rows of one shard only.
	rowTx := lock(`SELECT 1 FROM mcp_servers WHERE tenant_id = $1 AND server_id = $2 FOR UPDATE`, tenant, ids[3])
	var mu sync.Mutex
	var lockedRes, otherRes []timedCall
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			id, locked := ids[3], true
			if i%2 == 1 {
				id, locked = ids[2], false
			}
			t0 := time.Now()
			_, err := c.Heartbeat(ctx, id)
			r := timedCall{took: time.Since(t0), err: err, outcome: statusOf(err)}
			mu.Lock()
			if locked {
				lockedRes = append(lockedRes, r)
			} else {
				otherRes = append(otherRes, r)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := rowTx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var worstRow time.Duration
	otherOK := 0
	for _, r := range append(slices.Clone(lockedRes), otherRes...) {
		if r.err != nil && !isUnavailable(r.err) {
			t.Fatalf("heartbeat while a row is locked: %v, want 200 or 503", r.err)
		}
		if r.took > timeout+slack {
			t.Fatalf("heartbeat took %s with a %s request timeout", r.took, timeout)
		}
		worstRow = max(worstRow, r.took)
	}
	for _, r := range lockedRes {
		if r.err == nil {
			t.Fatalf("heartbeat of the locked server answered 200 while its row was locked")
		}
	}
	for _, r := range otherRes {
		if r.err == nil {
			otherOK++
		}
	}

	// Afterwards every call succeeds: on a loaded machine one may still
	// meet its 500 ms deadline (503, retry later) and succeed when tried
	// again; any other error fails.
	testwait.Until(t, "heartbeat after the locks", pollCap, func() bool { _, err := c.Heartbeat(ctx, ids[0]); return err == nil })
	for _, name := range names {
		retryUnavailable(t, name+" after the locks", pollCap, calls[name])
	}
	assertConsistent(t, readState(t, db.Admin), nil)
	assertNoPanic(t, "mcpd", p.stderr.String())
	if lines := logLines(p.stderr.String(), `"status":500`); len(lines) > 0 {
		t.Fatalf("500s logged: %s", lines[0])
	}
	t.Logf("FIGURE slow database: --request-timeout %s; table locked: %d calls all 503 with Retry-After, worst %s, "+
		"healthz %s; one row locked: its %d heartbeats 503, %d/%d heartbeats of another server 200, worst %s",
		timeout, len(results), worst.Round(time.Millisecond), healthz.Round(time.Millisecond), len(lockedRes),
		otherOK, len(otherRes), worstRow.Round(time.Millisecond))
}
