package testwait

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsWhenTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	Until(t, "three polls", time.Second, func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("polled %d times, want 3", got)
	}
}

// fatalRecorder records Fatalf and stops the goroutine, as testing.T does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestUntilFailsAfterTheLimit(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != rec {
				t.Fatalf("recovered %v, want the recorder's stop", r)
			}
		}()
		Until(rec, "never", 3*Step, func() bool { return false })
	}()
	if rec.msg == "" {
		t.Fatal("no failure after the limit")
	}
}

func TestPollReportsTheLastError(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	var n atomic.Int32
	func() {
		defer func() {
			if r := recover(); r != rec {
				t.Fatalf("recovered %v, want the recorder's stop", r)
			}
		}()
		Poll(rec, "never", 3*Step, func() error { n.Add(1); return errors.New("still no") })
	}()
	if n.Load() < 2 {
		t.Fatalf("polled %d times, want at least 2", n.Load())
	}
	Poll(t, "at once", Step, func() error { return nil })
}

func TestThroughoutChecksAllAlong(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	Throughout(t, 5*Step, func() { n.Add(1) })
	if n.Load() < 2 {
		t.Fatalf("%d checks over %v, want at the start, along and at the end", n.Load(), 5*Step)
	}
}
