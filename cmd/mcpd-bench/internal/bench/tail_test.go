package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSeriesBucketsByEnd(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	ends := []time.Duration{10 * ms, 90 * ms, 150 * ms, 320 * ms}
	lat := []time.Duration{2 * ms, 4 * ms, 70 * ms, 1 * ms}
	got := series(start, ends, lat, 100*ms)
	if len(got) != 4 {
		t.Fatalf("%d buckets, want 4: %+v", len(got), got)
	}
	want := []Bucket{
		{Start: start, Calls: 2, P99: 4 * ms, Max: 4 * ms},
		{Start: start.Add(100 * ms), Calls: 1, P99: 70 * ms, Max: 70 * ms},
		{Start: start.Add(200 * ms)},
		{Start: start.Add(300 * ms), Calls: 1, P99: 1 * ms, Max: 1 * ms},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestClosedLoopKeepsSeries(t *testing.T) {
	t.Parallel()
	res := ClosedLoop(context.Background(), 2, time.Minute, 50, func(context.Context, int64) error { return nil })
	var n int
	for _, b := range res.Series {
		n += b.Calls
	}
	if n != 50 || len(res.Above) != len(tailBounds) {
		t.Fatalf("series holds %d calls, want 50; %d shares above bounds, want %d", n, len(res.Above), len(tailBounds))
	}
}

func TestGCEventsFromGctrace(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "mcpd.log")
	lines := `{"time":"2026-12-03T05:00:01Z","level":"INFO","msg":"heartbeat"}
gc 7 @1.500s 2%: 0.11+12+0.20 ms clock, 0.22+1.3/2.1/0+0.40 ms cpu, 15->15->2 MB, 16 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 8 @9.000s 2%: 0.10+3.0+0.10 ms clock, 0.22+1.3/2.1/0+0.40 ms cpu, 15->15->2 MB, 16 MB goal, 0 MB stacks, 0 MB globals, 2 P
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	got := gcEvents(log, "mcpd-gc", started, started, started.Add(5*time.Second))
	if len(got) != 1 {
		t.Fatalf("events %+v, want gc 7 alone", got)
	}
	if !got[0].At.Equal(started.Add(1500*time.Millisecond)) || got[0].Length != 12310*time.Microsecond {
		t.Errorf("gc 7 at %v for %v, want %v for 12.31ms", got[0].At, got[0].Length, started.Add(1500*time.Millisecond))
	}
}

func TestPostgresEventsStartWhenTheStatementStarted(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "postgres.log")
	lines := `2026-12-03 05:00:01.250 UTC [42] LOG:  duration: 250.000 ms  execute <unnamed>: SELECT 1
2026-12-03 05:00:02.000 UTC [43] LOG:  checkpoint starting: time
2026-12-03 05:10:00.000 UTC [43] LOG:  checkpoint starting: time
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	got := postgresEvents(log, from, from.Add(time.Minute))
	if len(got) != 2 {
		t.Fatalf("events %+v, want 2", got)
	}
	if !got[0].At.Equal(from.Add(time.Second)) || got[0].Length != 250*time.Millisecond {
		t.Errorf("statement at %v for %v, want 05:00:01 for 250ms", got[0].At, got[0].Length)
	}
}

func TestAnalyseTailFindsTheSourceOfStalls(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	var buckets []Bucket
	var events []Event
	for k := range 20 {
		b := Bucket{Start: start.Add(time.Duration(k) * seriesBucket), Calls: 100, P99: 2 * time.Millisecond, Max: 3 * time.Millisecond}
		if k%5 == 0 {
			// A stall every 500 ms, and a pause just before it.
			b.Max = 60 * time.Millisecond
			events = append(events, Event{At: b.Start.Add(-50 * time.Millisecond), Length: 40 * time.Millisecond, Source: "pause"})
		}
		if k%5 == 2 {
			events = append(events, Event{At: b.Start.Add(10 * time.Millisecond), Source: "bystander"})
		}
		buckets = append(buckets, b)
	}
	rep := analyseTail(buckets, nil, events)
	if len(rep.Stalls) != 4 {
		t.Fatalf("%d stalls, want 4", len(rep.Stalls))
	}
	if got := rep.Overlap["pause"]; got[0] != 1 || got[1] >= 0.5 {
		t.Errorf("pause overlaps %v of stalls and buckets, want all stalls and under half the buckets", got)
	}
	if got := rep.Overlap["bystander"]; got[0] != 0 {
		t.Errorf("bystander overlaps %v of stalls, want none", got[0])
	}
}

func TestHeartbeatHistogramAgainstTheDriver(t *testing.T) {
	t.Parallel()
	count := 100.0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		route := `route="POST /v1/mcp/servers/heartbeat"`
		for _, le := range []string{"0.005", "0.01", "0.025", "0.05", "0.1", "+Inf"} {
			n := count
			if le == "0.005" || le == "0.01" {
				n = count - 10 // 10 calls over 10 ms
			}
			fmt.Fprintf(w, "mcpd_http_request_duration_seconds_bucket{code=\"200\",%s,le=%q} %g\n", route, le, n)
			fmt.Fprintf(w, "mcpd_http_request_duration_seconds_bucket{code=\"404\",%s,le=%q} 7\n", route, le)
		}
	}))
	defer srv.Close()
	before := map[string]float64{"0.01": 0, "0.025": 0, "0.05": 0, "0.1": 0, "+Inf": 0}
	after, err := heartbeatHistogram(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got := aboveBounds([]float64{0.2, 0.05, 0.01, 0}, before, after)
	near := func(a, b [2]float64) bool { return math.Abs(a[0]-b[0]) < 1e-9 && math.Abs(a[1]-b[1]) < 1e-9 }
	if !near(got["10ms"], [2]float64{0.2, 0.1}) || !near(got["25ms"], [2]float64{0.05, 0}) {
		t.Errorf("above = %v, want 10ms [0.2 0.1], 25ms [0.05 0]", got)
	}
}
