package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/auth"
)

// WatchResult is one watcher load: n streams of one tenant open on one
// mcpd, idle and then receiving transitions.
type WatchResult struct {
	Watchers  int `json:"watchers"`
	Connected int `json:"connected"`
	// Transitions were committed one at a time; each reached Deliveries of
	// the Watchers x Transitions it should have.
	Transitions int   `json:"transitions"`
	Deliveries  int64 `json:"deliveries"`
	// Delay from a transition's commit (its registration answered) to its
	// arrival at a watcher, over every watcher and transition (wall clock).
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// RSSPerWatcher is mcpd's RSS with the watchers open minus without,
	// per watcher, in bytes.
	RSSPerWatcher float64 `json:"rss_per_watcher_bytes"`
	// IdleCPU is mcpd's CPU with the watchers open and nothing happening,
	// in cores; IdlePostgresCPU PostgreSQL's meanwhile (mcpd's feed reads,
	// sweeps and the rest of what it does when idle).
	IdleCPU         float64 `json:"idle_cpu_cores"`
	IdlePostgresCPU float64 `json:"idle_postgres_cpu_cores"`
	// DBXactPerSec is the database's transactions per second over the idle
	// period (mcpd's feed reads and everything else it does when idle).
	DBXactPerSec float64 `json:"db_xact_per_second"`
	// FeedReadsPerSec is mcpd_feed_reads_total's rate over the idle period.
	FeedReadsPerSec float64 `json:"feed_reads_per_second"`
	Errors          int64   `json:"errors"`
	FirstError      string  `json:"first_error,omitempty"`
}

// watchIdle is how long an idle watcher load is observed, after
// watchSettle.
const (
	watchIdle   = 5 * time.Second
	watchSettle = 11 * time.Second
)

// MeasureWatchers opens n watch streams of one fresh tenant on the mcpd at
// baseURL (tokens signed by secret), observes mcpd (pid) idle for
// watchIdle, then commits transitions registrations one at a time and
// times their arrival at every watcher. admin reads the database's
// transaction count.
func MeasureWatchers(ctx context.Context, baseURL string, secret []byte, pid, postmasterPID int, admin *pgxpool.Pool, n, transitions int) (WatchResult, error) {
	res := WatchResult{Watchers: n, Transitions: transitions}
	tenant := uuid.New()
	tok, err := auth.Issue(secret, tenant, "mcpd-bench", auth.ScopeRead+" "+auth.ScopeWrite, 2*time.Hour, time.Now())
	if err != nil {
		return res, err
	}
	c, err := NewTenantClient(baseURL, secret, tenant)
	if err != nil {
		return res, err
	}
	before, err := ReadMemory(pid)
	if err != nil {
		return res, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		arrivals = map[string][]time.Time{} // module -> arrival at each watcher
		errs     atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
		up       sync.WaitGroup
	)
	fail := func(err error) {
		if errs.Add(1) == 1 {
			firstErr.Store(err.Error())
		}
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	host := strings.TrimPrefix(baseURL, "http://")
	sem := make(chan struct{}, 200) // connections being opened at once
	up.Add(n)
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			connected := false
			defer func() {
				if !connected {
					up.Done()
				}
			}()
			conn, err := dialer.DialContext(ctx, "tcp", host)
			if err != nil {
				<-sem
				fail(err)
				return
			}
			defer func() { _ = conn.Close() }()
			context.AfterFunc(ctx, func() { _ = conn.Close() })
			fmt.Fprintf(conn, "GET /v1/mcp/watch HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", host, tok)
			br := bufio.NewReaderSize(conn, 4096)
			resp, err := http.ReadResponse(br, nil)
			<-sem
			if err != nil {
				fail(err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode != http.StatusOK {
				fail(fmt.Errorf("watch: status %d", resp.StatusCode))
				return
			}
			connected = true
			up.Done()
			body := bufio.NewReaderSize(resp.Body, 4096)
			for {
				line, err := body.ReadString('\n')
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				if !strings.HasPrefix(line, "data: {\"event_id\"") {
					continue
				}
				at := time.Now()
				// The module's name, without decoding the whole event.
				const key = `"module_name":"`
				if i := strings.Index(line, key); i >= 0 {
					rest := line[i+len(key):]
					if j := strings.IndexByte(rest, '"'); j >= 0 {
						mu.Lock()
						arrivals[rest[:j]] = append(arrivals[rest[:j]], at)
						mu.Unlock()
					}
				}
			}
		})
	}
	up.Wait()
	res.Connected = n - int(errs.Load())
	// Let the connections settle, and the statistics of the reads that
	// opened them reach pg_stat_database: a backend that flushed its
	// counters less than a second before keeps the next ones until it has
	// been idle for 10 s (PostgreSQL's PGSTAT_IDLE_INTERVAL), which would
	// count the watches' start in the idle window.
	time.Sleep(watchSettle)

	// Idle: CPU, RSS, the database's transactions and the feed's reads.
	xact0, err := dbXacts(ctx, admin)
	if err != nil {
		return res, err
	}
	reads0 := feedReads(ctx, baseURL)
	cpu0 := TakeCPUSnapshot(pid, postmasterPID)
	t0 := time.Now()
	time.Sleep(watchIdle)
	cpu := TakeCPUSnapshot(pid, postmasterPID).Since(cpu0)
	idleFor := time.Since(t0).Seconds()
	xact1, err := dbXacts(ctx, admin)
	if err != nil {
		return res, err
	}
	res.IdleCPU, res.IdlePostgresCPU = cpu.Server, cpu.Postgres
	res.DBXactPerSec = float64(xact1-xact0) / idleFor
	res.FeedReadsPerSec = (feedReads(ctx, baseURL) - reads0) / idleFor
	with, err := ReadMemory(pid)
	if err != nil {
		return res, err
	}
	if res.Connected > 0 {
		res.RSSPerWatcher = float64(with.RSS-before.RSS) / float64(res.Connected)
	}

	// Transitions, one at a time.
	committed := map[string]time.Time{}
	for i := range transitions {
		req := RegisterRequest(i + 1)
		if _, _, err := c.Register(ctx, req, ""); err != nil {
			return res, fmt.Errorf("register: %w", err)
		}
		committed[req.ModuleName] = time.Now()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			got := len(arrivals[req.ModuleName])
			mu.Unlock()
			if got >= res.Connected {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The next commit at a random phase of the hub's poll: a fixed
		// pause after the last arrival (which follows a poll) would commit
		// every transition just after a poll, and time a whole poll
		// interval each time.
		time.Sleep(100*time.Millisecond + rand.N(watchPhase))
	}
	cancel()
	wg.Wait()

	var delays []time.Duration
	for module, at := range committed {
		for _, a := range arrivals[module] {
			delays = append(delays, max(a.Sub(at), 0))
		}
	}
	res.Deliveries = int64(len(delays))
	if len(delays) > 0 {
		slices.Sort(delays)
		res.P50 = delays[len(delays)/2]
		res.P99 = delays[min(len(delays)-1, len(delays)*99/100)]
		res.Max = delays[len(delays)-1]
	}
	res.Errors = errs.Load()
	if v, ok := firstErr.Load().(string); ok {
		res.FirstError = v
	}
	if res.Deliveries == 0 {
		return res, errors.New("no event reached a watcher")
	}
	return res, nil
}

// dbXacts is the current database's committed and rolled-back transactions.
func dbXacts(ctx context.Context, admin *pgxpool.Pool) (int64, error) {
	var n int64
	err := admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

// feedReads reads mcpd_feed_reads_total from mcpd's /metrics (0 when it
// cannot).
func feedReads(ctx context.Context, baseURL string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	var total float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mcpd_feed_reads_total{") {
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err == nil {
				total += v
			}
		}
	}
	return total
}

// Targets of the change feed (issue 14).
const (
	targetWatchP99    = 250 * time.Millisecond
	targetWatchRSSKiB = 30
	watchXactSlack    = 2 // database transactions/s above the rate with no watcher
	// watchPhase spreads the transitions over the hub's poll interval
	// (feed.DefaultPollInterval).
	watchPhase            = 100 * time.Millisecond
	watchTransitions      = 10
	watchIdleOnlyWatchers = 0
)

// watchers measures the change feed on an mcpd of its own: idle with no
// watcher, then each configured number of watchers.
func (r *runner) watchers(ctx context.Context) {
	if len(r.cfg.Watchers) == 0 {
		return
	}
	if r.mcpdBin == "" {
		r.rep.skip("watch", "g. change feed", "mcpd was not built")
		return
	}
	// All the watchers are of one tenant: the per-tenant limits (100
	// streams by default) are lifted for them.
	m, err := StartMCPD(ctx, r.mcpdBin, r.work, "mcpd-watch", "--database-url", r.appURL,
		"--auth-jwt-secret-file", r.secretFile, "--heartbeat-interval", mcpdHeartbeatInterval.String(),
		"--tenant-max-watches", "0", "--tenant-rate-limit", "0")
	if err != nil {
		r.rep.fail("watch", "g. change feed", err)
		return
	}
	defer func() {
		if err := m.Stop(mcpdShutdown); err != nil {
			r.log.Warn("stop mcpd", "err", err)
		}
	}()
	var results []WatchResult
	for _, n := range append([]int{watchIdleOnlyWatchers}, r.cfg.Watchers...) {
		r.log.Info("watchers on one mcpd", "watchers", n)
		res, err := MeasureWatchers(ctx, m.URL, r.secret, m.PID(), r.pg.PID(), r.admin, n, watchTransitions)
		results = append(results, res)
		if n == 0 {
			// No watcher: only the idle figures mean something.
			err = nil
		}
		if err != nil {
			r.rep.fail(fmt.Sprintf("watch_%d", n), fmt.Sprintf("g. change feed, %d watchers", n), err)
			continue
		}
		if n == 0 {
			r.rep.add(Row{ID: "watch_0_xact", Measure: "g. database transactions/s, mcpd idle, no watcher", Value: res.DBXactPerSec,
				Unit: unitPerSecond, Note: fmt.Sprintf("feed reads %.1f/s; mcpd idle CPU %.2f %% of a core, PostgreSQL's meanwhile %.2f %%",
					res.FeedReadsPerSec, 100*res.IdleCPU, 100*res.IdlePostgresCPU)})
			continue
		}
		note := fmt.Sprintf("%d connected, %d of %d deliveries, %d errors; p50 %.1f ms, max %.1f ms (wall clock)",
			res.Connected, res.Deliveries, int64(res.Connected)*int64(res.Transitions), res.Errors, millis(res.P50), millis(res.Max))
		if res.FirstError != "" {
			note += "; first error: " + firstLine(res.FirstError)
		}
		r.rep.add(Row{ID: fmt.Sprintf("watch_%d_p99", n), Measure: fmt.Sprintf("g. commit to every watcher, %s watchers: p99", groupThousands(float64(n))),
			Value: millis(res.P99), Unit: unitMillis, Target: millis(targetWatchP99), Direction: AtMost, Note: note})
		r.rep.add(Row{ID: fmt.Sprintf("watch_%d_rss", n), Measure: fmt.Sprintf("g. mcpd RSS per idle watcher, %s watchers", groupThousands(float64(n))),
			Value: res.RSSPerWatcher / 1024, Unit: "KiB", Target: targetWatchRSSKiB, Direction: AtMost})
		r.rep.add(Row{ID: fmt.Sprintf("watch_%d_cpu", n), Measure: fmt.Sprintf("g. mcpd CPU, %s idle watchers", groupThousands(float64(n))),
			Value: 100 * res.IdleCPU, Unit: unitPercent, Basis: BasisCPU, Note: "of one core, CPU time over 5 s"})
		r.rep.add(Row{ID: fmt.Sprintf("watch_%d_xact", n), Measure: fmt.Sprintf("g. database transactions/s, %s idle watchers", groupThousands(float64(n))),
			Value: res.DBXactPerSec, Unit: unitPerSecond, Target: results[0].DBXactPerSec + watchXactSlack, Direction: AtMost,
			Note: fmt.Sprintf("feed reads %.1f/s; target: at most the rate with no watcher + %d/s (no growth with watchers)", res.FeedReadsPerSec, watchXactSlack)})
	}
	r.rep.Details["watchers"] = results
}
