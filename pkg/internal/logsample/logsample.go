// Package logsample thins out log records that a lasting fault repeats:
// of each kind of record, the first few of a window are logged and the
// rest left out, and the next record logged says how many were. A
// database outage, met by every request, then logs a few lines a minute
// instead of one per request; the metrics still count every one.
package logsample

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// RepeatWindow is how often a record that a lasting fault repeats on every
// request, flush or sweep (an outage of the database or of a Citus worker)
// is logged.
const RepeatWindow = 10 * time.Second

// NewRepeated returns a Sampler that logs one record of a kind per
// RepeatWindow, reading the time from now.
func NewRepeated(now func() time.Time) *Sampler { return New(RepeatWindow, 1, now) }

// Sampler decides which records of each kind are logged. Make one with
// New; it is safe for concurrent use.
type Sampler struct {
	window time.Duration
	burst  int
	now    func() time.Time

	mu sync.Mutex
	// kinds are the runs of records seen, by kind: a bounded set (callers
	// name kinds with constants or route patterns).
	kinds map[string]*run
}

// run is what a Sampler knows of one kind of record.
type run struct {
	windowStart time.Time
	logged      int // in the window
	left        int // left out since the last record logged
}

// New returns a Sampler that logs the first burst records of a kind in
// each window (a window starts with the first record after the last one
// ended), reading the time from now.
func New(window time.Duration, burst int, now func() time.Time) *Sampler {
	return &Sampler{window: window, burst: max(burst, 1), now: now, kinds: make(map[string]*run)}
}

// Allow reports whether a record of kind is to be logged now and, when it
// is, how many records of kind were left out since the last one logged
// (to be logged with it, when not 0).
func (s *Sampler) Allow(kind string) (log bool, leftOut int) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.kinds[kind]
	if r == nil {
		r = &run{}
		s.kinds[kind] = r
	}
	if r.windowStart.IsZero() || now.Sub(r.windowStart) >= s.window {
		r.windowStart, r.logged = now, 0
	}
	if r.logged >= s.burst {
		r.left++
		return false, 0
	}
	r.logged++
	leftOut, r.left = r.left, 0
	return true, leftOut
}

// Warn logs msg with args on logger at warn level when s allows a record
// of the kind msg, adding "suppressed" (how many records of that kind
// were left out since the last one logged) when there were any.
func (s *Sampler) Warn(ctx context.Context, logger *slog.Logger, msg string, args ...any) {
	s.WarnAs(ctx, logger, msg, msg, args...)
}

// WarnAs is Warn for records of kind, which one message may have several
// of (one per route, say).
func (s *Sampler) WarnAs(ctx context.Context, logger *slog.Logger, kind, msg string, args ...any) {
	log, leftOut := s.Allow(kind)
	if !log {
		return
	}
	if leftOut > 0 {
		args = append(args, "suppressed", leftOut)
	}
	logger.WarnContext(ctx, msg, args...)
}
