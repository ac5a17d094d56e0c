package logsample_test

import (
	"sync"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/internal/logsample"
)

type step struct {
	at   time.Duration // since the start
	kind string
	log  bool
	held int
}

func TestSamplerLogsFirstThenOnePerInterval(t *testing.T) {
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	now := start
	s := logsample.New(10*time.Second, 1, func() time.Time { return now })
	for i, st := range []step{
		{0, "a", true, 0},
		{time.Second, "a", false, 0},
		{2 * time.Second, "a", false, 0},
		{2 * time.Second, "b", true, 0}, // another kind runs apart
		{9 * time.Second, "a", false, 0},
		{10 * time.Second, "a", true, 3},
		{11 * time.Second, "a", false, 0},
		{60 * time.Second, "a", true, 1},
		{61 * time.Second, "b", true, 0},
		{200 * time.Second, "a", true, 0},
	} {
		now = start.Add(st.at)
		log, held := s.Allow(st.kind)
		if log != st.log || held != st.held {
			t.Errorf("step %d (%s at %v): Allow = %v, %d; want %v, %d", i, st.kind, st.at, log, held, st.log, st.held)
		}
	}
}

// With a burst, the first records of each window are logged, and the
// first logged after those left out counts them.
func TestSamplerBurst(t *testing.T) {
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	now := start
	s := logsample.New(time.Minute, 3, func() time.Time { return now })
	var got []int // -1: left out, else the count logged
	for i := range 8 {
		now = start.Add(time.Duration(i) * time.Second)
		if log, left := s.Allow("handshake"); log {
			got = append(got, left)
		} else {
			got = append(got, -1)
		}
	}
	now = start.Add(time.Minute) // a new window
	if log, left := s.Allow("handshake"); log {
		got = append(got, left)
	}
	want := []int{0, 0, 0, -1, -1, -1, -1, -1, 5}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// Every record is either logged or counted in a later logged one's held.
func TestSamplerCountsEveryRecordOnce(t *testing.T) {
	var mu sync.Mutex
	tick := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := logsample.New(time.Second, 1, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Millisecond)
		return tick
	})
	const callers, each = 8, 1000
	var wg sync.WaitGroup
	var logged, held int
	var countMu sync.Mutex
	for range callers {
		wg.Go(func() {
			for range each {
				if log, h := s.Allow("outage"); log {
					countMu.Lock()
					logged, held = logged+1, held+h
					countMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	// The records after the last logged one are still held: one more
	// Allow past the interval returns them.
	mu.Lock()
	tick = tick.Add(time.Hour)
	mu.Unlock()
	log, h := s.Allow("outage")
	if !log {
		t.Fatal("a record an hour later was not logged")
	}
	if got := logged + held + h; got != callers*each {
		t.Errorf("logged %d, held %d then %d: %d records, want %d", logged, held, h, got, callers*each)
	}
	// 8,000 records 1 ms apart: 8 s, so about 8 logged.
	if logged < 2 || logged > 10 {
		t.Errorf("logged %d of %d records over 8 s at one a second", logged, callers*each)
	}
}
