// Package logsample thins out log records that a lasting fault repeats:
// the first record of a kind is logged, then at most one per interval,
// which carries how many were held back since the one before. A database
// outage, met by every request, then logs a few lines a minute instead of
// one per request; the metrics still count every one.
package logsample

import (
	"sync"
	"time"
)

// Sampler decides which records of each kind are logged. Its zero value
// is not usable: make one with New. It is safe for concurrent use.
type Sampler struct {
	interval time.Duration
	now      func() time.Time

	mu sync.Mutex
	// kinds are the runs of records seen, by kind. Callers name kinds
	// with constants, so the map stays small.
	kinds map[string]*run
}

// run is what a Sampler knows of one kind of record.
type run struct {
	logged time.Time // when the last record was logged
	held   int       // records held back since
}

// New returns a Sampler that logs at most one record of a kind per
// interval, reading the time from now.
func New(interval time.Duration, now func() time.Time) *Sampler {
	return &Sampler{interval: interval, now: now, kinds: make(map[string]*run)}
}

// Allow reports whether a record of kind is to be logged now and, when it
// is, how many records of kind were held back since the last one logged
// (to be logged with it).
func (s *Sampler) Allow(kind string) (log bool, held int) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.kinds[kind]
	if r == nil {
		s.kinds[kind] = &run{logged: now}
		return true, 0
	}
	if now.Sub(r.logged) < s.interval {
		r.held++
		return false, 0
	}
	held, r.held, r.logged = r.held, 0, now
	return true, held
}
