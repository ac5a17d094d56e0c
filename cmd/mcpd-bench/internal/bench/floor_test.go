package bench

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The floor answers the harness's heartbeats as mcpd answers a held one
// (200, a healthy server of the seeded shape), and refuses a token it
// cannot verify, as mcpd does.
func TestFloorAnswersHeartbeats(t *testing.T) {
	dir := t.TempDir()
	secretFile, secret, err := WriteSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeFloor(ctx, addr, secretFile) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + addr
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fleet, err := NewFleet(base, secret, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	res := ClosedLoop(context.Background(), 4, 200*time.Millisecond, 500, fleet.Heartbeat)
	if res.Calls == 0 || res.Errors != 0 {
		t.Fatalf("%d heartbeats, %d errors (%s); want some and none", res.Calls, res.Errors, res.FirstError)
	}
	srv, err := fleet.Client(2).Heartbeat(context.Background(), ServerID(7))
	if err != nil {
		t.Fatal(err)
	}
	if srv.ServerID != ServerID(7) || srv.TenantID != TenantID(2) || srv.Status != "healthy" || srv.ModuleName == "" ||
		time.Since(srv.LastHeartbeatAt) > time.Minute {
		t.Fatalf("answer %+v", srv)
	}
	other, err := NewFleet(base, []byte("another secret, another secret!!"), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Heartbeat(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a token of another secret: %v, want 401", err)
	}
}

func TestServeFloorNeedsItsSecret(t *testing.T) {
	if err := ServeFloor(context.Background(), "127.0.0.1:0", filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("served without a secret file")
	}
}

const flushMetricsText = `# HELP mcpd_heartbeat_flush_writes_total Store calls.
# TYPE mcpd_heartbeat_flush_writes_total counter
mcpd_heartbeat_flush_writes_total{result="error"} 1
mcpd_heartbeat_flush_writes_total{result="ok"} 40
mcpd_heartbeat_flush_heartbeats_total 2000
mcpd_heartbeat_flush_dropped_total 0
mcpd_heartbeats_total{result="ok"} 2100
mcpd_heartbeats_total{result="not_found"} 3
mcpd_heartbeat_flush_lag_seconds_bucket{le="0.25"} 0
mcpd_heartbeat_flush_lag_seconds_bucket{le="0.5"} 10
mcpd_heartbeat_flush_lag_seconds_bucket{le="0.75"} 100
mcpd_heartbeat_flush_lag_seconds_bucket{le="1"} 100
mcpd_heartbeat_flush_lag_seconds_bucket{le="+Inf"} 100
mcpd_heartbeat_flush_lag_seconds_sum 60
mcpd_heartbeat_flush_lag_seconds_count 100
`

func TestParseFlushMetrics(t *testing.T) {
	m := ParseFlushMetrics([]byte(flushMetricsText))
	if m.WritesOK != 40 || m.WritesError != 1 || m.Heartbeats != 2000 || m.Answered != 2100 || m.LagCount != 100 ||
		len(m.LagBounds) != 4 || m.LagBounds[1] != 0.5 || m.LagCounts[2] != 100 {
		t.Fatalf("parsed %+v", m)
	}
	if got := m.PerWrite(); got != 50 {
		t.Fatalf("per write %v, want 50", got)
	}
	// The 99th of 100 flushes is the 89th of the 90 in (0.5, 0.75].
	q, bound := m.LagQuantile(0.99)
	if want := 0.5 + 0.25*89/90; math.Abs(q-want) > 1e-9 || bound != 0.75 {
		t.Fatalf("p99 %v (bucket %v), want %v (0.75)", q, bound, want)
	}
	d := m.Since(ParseFlushMetrics([]byte(strings.ReplaceAll(flushMetricsText, " 100\n", " 90\n"))))
	if d.LagCount != 10 || d.LagCounts[2] != 10 || d.LagCounts[1] != 0 || d.WritesOK != 0 {
		t.Fatalf("since %+v", d)
	}
	if q, _ := (FlushMetrics{}).LagQuantile(0.99); q != 0 {
		t.Fatalf("no flush: p99 %v", q)
	}
}

func TestReadFlushMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(flushMetricsText))
	}))
	defer srv.Close()
	m, err := ReadFlushMetrics(context.Background(), srv.Client(), srv.URL)
	if err != nil || m.WritesOK != 40 {
		t.Fatalf("%+v, %v", m, err)
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("mcpd_heartbeats_total{result=\"ok\"} 5\n"))
	}))
	defer bare.Close()
	if _, err := ReadFlushMetrics(context.Background(), bare.Client(), bare.URL); err == nil {
		t.Fatal("an mcpd that does not hold heartbeats was taken for one that does")
	}
}

const walStatsText = `Type                                           N      (%)          Record size      (%)             FPI size      (%)        Combined size      (%)
----                                           -      ---          -----------      ---             --------      ---        -------------      ---
Heap/HOT_UPDATE                              900 ( 45.00)                64800 ( 40.00)                    0 (  0.00)                64800 ( 38.00)
Transaction/COMMIT                           200 ( 10.00)                 6800 (  4.00)                 8192 ( 50.00)                14992 (  9.00)
Btree/INSERT_LEAF                           1000 ( 45.00)                90000 ( 56.00)                    0 (  0.00)                90000 ( 53.00)
                                        --------                      --------                      --------                      --------
Total                                       2100                        161600 [95.00%]              8192 [5.00%]               169792 [100%]
`

func TestParseWALStats(t *testing.T) {
	stats := parseWALStats(walStatsText)
	if len(stats) != 3 || stats[0].Type != "Btree/INSERT_LEAF" || stats[0].Records != 1000 || stats[0].Bytes != 90000 ||
		stats[2].Type != "Transaction/COMMIT" || stats[2].Bytes != 14992 {
		t.Fatalf("parsed %+v", stats)
	}
	if got := describeWALStats(stats, 100, 2); got != "per heartbeat by pg_waldump: Btree/INSERT_LEAF 10.00 records / 900 B, Heap/HOT_UPDATE 9.00 records / 648 B" {
		t.Fatalf("described %q", got)
	}
	if lsnString(0x1_0000_00A8) != "1/A8" {
		t.Fatal(lsnString(0x1_0000_00A8))
	}
}

func TestPostgresKind(t *testing.T) {
	for title, want := range map[string]string{
		"postgres: walwriter \x00":                                      "walwriter",
		"postgres: mcpd_bench_app mcpd_bench 127.0.0.1(41234) idle\x00": "backend mcpd_bench_app",
		"postgres: autovacuum worker mcpd_bench\x00":                    "autovacuum worker",
		"postgres: logical replication launcher \x00":                   "logical replication",
		"postgres: postgres mcpd_bench [local] SELECT\x00":              "backend postgres",
		"": "unknown",
	} {
		if got := postgresKind(title); got != want {
			t.Errorf("postgresKind(%q) = %q, want %q", title, got, want)
		}
	}
	cores := postgresCPUSince(map[string]float64{"walwriter": 3, "backend x": 10}, map[string]float64{"walwriter": 1, "backend x": 10}, 2)
	if len(cores) != 1 || cores["walwriter"] != 1 {
		t.Fatalf("since %v", cores)
	}
	if got := describePostgresCPU(map[string]float64{"walwriter": 0.01}, 100, 10); got != "PostgreSQL CPU per heartbeat by process: walwriter 1000 µs" {
		t.Fatal(got)
	}
}
