package bench

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestQuantile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var sorted []time.Duration
	for i := 1; i <= 100; i++ {
		sorted = append(sorted, ms(i))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, ms(50)}, {0.99, ms(99)}, {1, ms(100)}, {0, ms(1)}, {0.999, ms(100)}} {
		if got := Quantile(sorted, c.q); got != c.want {
			t.Fatalf("Quantile(1..100 ms, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Quantile(nil, 0.99); got != 0 {
		t.Fatalf("Quantile(empty) = %v, want 0", got)
	}
	if got := Quantile([]time.Duration{ms(7)}, 0.99); got != ms(7) {
		t.Fatalf("Quantile(one) = %v, want 7ms", got)
	}
}

func TestClosedLoopBoundedByCount(t *testing.T) {
	var calls atomic.Int64
	res := ClosedLoop(context.Background(), 8, time.Minute, 1000, func(ctx context.Context, seq int64) error {
		if seq < 0 || seq >= 1000 {
			t.Errorf("seq %d out of range", seq)
		}
		calls.Add(1)
		return nil
	})
	if calls.Load() != 1000 || res.Calls != 1000 || res.Errors != 0 {
		t.Fatalf("calls %d, result %+v; want 1000 calls and no error", calls.Load(), res)
	}
	if res.Throughput <= 0 || res.P99 < res.P50 || res.Max < res.P99 {
		t.Fatalf("implausible result %+v", res)
	}
}

func TestClosedLoopBoundedByTime(t *testing.T) {
	start := time.Now()
	res := ClosedLoop(context.Background(), 4, 100*time.Millisecond, 1<<40, func(ctx context.Context, _ int64) error {
		select {
		case <-time.After(time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("a 100 ms loop took %v", el)
	}
	if res.Errors != 0 {
		t.Fatalf("the deadline's own cancellations counted as errors: %+v", res)
	}
	if res.Calls < 20 {
		t.Fatalf("only %d calls in 100 ms from 4 workers of 1 ms calls", res.Calls)
	}
}

func TestClosedLoopCountsErrors(t *testing.T) {
	boom := errors.New("boom")
	res := ClosedLoop(context.Background(), 2, time.Minute, 10, func(ctx context.Context, seq int64) error {
		if seq%2 == 0 {
			return boom
		}
		return nil
	})
	if res.Calls != 10 || res.Errors != 5 || res.FirstError != "boom" {
		t.Fatalf("result %+v; want 10 calls, 5 errors, first error boom", res)
	}
	if want := float64(5) / res.Elapsed.Seconds(); res.Throughput != want {
		t.Fatalf("throughput %v counts failures; want %v", res.Throughput, want)
	}
}

func TestOpenLoopKeepsSchedule(t *testing.T) {
	var calls atomic.Int64
	start := time.Now()
	res := OpenLoop(context.Background(), 2000, 16, 250*time.Millisecond, time.Second, 1<<40,
		func(ctx context.Context, _ int64) error {
			calls.Add(1)
			return nil
		})
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("a 250 ms open loop took %v", el)
	}
	if res.Calls != 500 || calls.Load() != 500 || res.Errors != 0 {
		t.Fatalf("result %+v, %d calls; want exactly 2000/s x 250 ms = 500 calls", res, calls.Load())
	}
	if res.OfferedRate != 2000 {
		t.Fatalf("offered rate %v", res.OfferedRate)
	}
}

func TestOpenLoopCountsQueueing(t *testing.T) {
	// One worker, calls of 5 ms, offered 1000/s: the schedule runs far ahead
	// of the worker, and the latency from each call's due time must show it.
	res := OpenLoop(context.Background(), 1000, 1, 50*time.Millisecond, 2*time.Second, 1<<40,
		func(ctx context.Context, _ int64) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		})
	if res.Calls != 50 {
		t.Fatalf("calls %d, want 50", res.Calls)
	}
	if res.Max < 100*time.Millisecond {
		t.Fatalf("max latency %v: the wait for the busy worker is not counted", res.Max)
	}
}

func TestOpenLoopDrainBounded(t *testing.T) {
	start := time.Now()
	res := OpenLoop(context.Background(), 100, 1, 50*time.Millisecond, 100*time.Millisecond, 1<<40,
		func(ctx context.Context, _ int64) error {
			<-ctx.Done()
			return ctx.Err()
		})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("drain not bounded: %v", el)
	}
	if res.Errors != res.Calls || res.Calls != 5 {
		t.Fatalf("result %+v; want 5 calls, all failed", res)
	}
}

func TestFleetServerSpread(t *testing.T) {
	for _, size := range []struct{ tenants, modules int }{{1000, 100}, {20, 50}, {7919, 1}, {3, 3}} {
		f := &Fleet{Tenants: size.tenants, Modules: size.modules}
		total := size.tenants * size.modules
		seen := make(map[uuid.UUID]bool, total)
		sameTenant := 0
		prev := 0
		for seq := int64(0); seq < int64(total); seq++ {
			tenant, id := f.Server(seq)
			if tenant < 1 || tenant > size.tenants {
				t.Fatalf("%v: seq %d tenant %d out of range", size, seq, tenant)
			}
			if seen[id] {
				t.Fatalf("%v: server %s twice in one pass", size, id)
			}
			seen[id] = true
			if tenant == prev {
				sameTenant++
			}
			prev = tenant
		}
		if len(seen) != total {
			t.Fatalf("%v: %d servers in a pass, want %d", size, len(seen), total)
		}
		if size.tenants >= 20 && sameTenant > total/10 {
			t.Fatalf("%v: %d of %d successive calls on the same tenant", size, sameTenant, total)
		}
	}
	// The ids are those the seed gives: server n of tenant (n-1)/modules+1.
	f := &Fleet{Tenants: 10, Modules: 10}
	for seq := int64(0); seq < 100; seq++ {
		tenant, id := f.Server(seq)
		n := -1
		for k := 1; k <= 100; k++ {
			if ServerID(k) == id {
				n = k
			}
		}
		if n < 0 || (n-1)/10+1 != tenant {
			t.Fatalf("seq %d: server %s (n %d) given to tenant %d", seq, id, n, tenant)
		}
	}
}

func TestSeedIDsMatchSQL(t *testing.T) {
	// md5('server1')::uuid in PostgreSQL is the md5 digest's hex as a uuid.
	if got, want := ServerID(1).String(), "a8438da7-8e67-9f44-a5cf-f9e44ebacfbd"; got != want {
		t.Fatalf("ServerID(1) = %s, want %s", got, want)
	}
}

func TestReadMemory(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS {
		t.Fatalf("implausible memory %+v", m)
	}
	if _, err := ReadMemory(-5); err == nil {
		t.Fatal("ReadMemory of no process did not fail")
	}
}

func TestReportTable(t *testing.T) {
	rep := &Report{}
	rep.add(Row{Measure: "rate", Value: 12345.6, Unit: unitPerSecond, Target: 10000, Direction: AtLeast})
	rep.add(Row{Measure: "latency", Value: 12.5, Unit: unitMillis, Target: 10, Direction: AtMost})
	rep.add(Row{Measure: "baseline", Value: 0.25, Unit: unitMillis})
	rep.add(Row{Measure: "cpu", Value: 80, Unit: unitMicros})
	rep.skip("x", "etcd", "not installed")
	rep.fail("y", "broken", errors.New("it broke\nsecond line"))
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `MEASURE   VALUE     BASIS     TARGET       RATIO  VERDICT
rate      12,346/s  wall      >= 10,000/s  1.23   pass
latency   12.50 ms  wall      <= 10.00 ms  1.25   FAIL
baseline  0.250 ms  wall      -            -      info
cpu       80 µs     cpu/call  -            -      info
etcd      -         -         -            -      skipped: not installed
broken    -         -         -            -      error: it broke
`
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| rate | 12,346/s | wall | ≥ 10,000/s | 1.23 | pass |\n") {
		t.Fatalf("markdown:\n%s", md.String())
	}
}

func TestGroupThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -4200: "-4,200", 100000: "100,000"} {
		if got := groupThousands(v); got != want {
			t.Fatalf("groupThousands(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	c := DefaultConfig()
	c.Clients, c.LargeTenants, c.Duration = 0, 10, time.Hour
	err := c.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"-clients", "-large-tenants", "durations"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
}

func TestCPUSnapshot(t *testing.T) {
	s0 := TakeCPUSnapshot(os.Getpid(), 0)
	deadline := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	u := TakeCPUSnapshot(os.Getpid(), 0).Since(s0)
	if u.Driver <= 0 || u.Server <= 0 || u.Driver > float64(runtimeCPUs())+0.5 {
		t.Fatalf("a busy loop of 200 ms used %+v (x=%d)", u, x)
	}
	if !strings.Contains(u.Describe("mcpd"), "mcpd ") || strings.Contains(u.Describe(""), "mcpd") {
		t.Fatalf("describe: %q / %q", u.Describe("mcpd"), u.Describe(""))
	}
}

func runtimeCPUs() int { return runtime.NumCPU() }
