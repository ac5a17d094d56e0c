package simulate

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// startProgress writes the live line to opts.Progress once a second, until
// the returned stop (idempotent) writes it a last time and ends the line.
func (r *runner) startProgress() (stop func()) {
	w := r.opts.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	width := 0
	var prevSent int64
	prevAt := time.Now()
	write := func() {
		now := time.Now()
		line := r.progressLine(now.Sub(prevAt), &prevSent)
		prevAt = now
		pad := max(width-len(line), 0)
		width = max(width, len(line))
		fmt.Fprint(w, "\r"+line+strings.Repeat(" ", pad))
	}
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				write()
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			write()
			fmt.Fprintln(w)
		})
	}
}

// progressLine says where the run is; the rate is over the last dt.
func (r *runner) progressLine(dt time.Duration, prevSent *int64) string {
	start := time.Duration(r.phaseStart.Load())
	if start == 0 {
		return fmt.Sprintf("registering %d/%d", r.registering.Load(), r.opts.Servers)
	}
	elapsed := min(r.since()-start, r.opts.Duration)
	if end := time.Duration(r.phaseEnd.Load()); end > 0 {
		elapsed = end - start
	}
	sent := r.sent.Load()
	rate := 0.0
	if dt > 0 {
		rate = float64(sent-*prevSent) / dt.Seconds()
	}
	*prevSent = sent
	return fmt.Sprintf("%s/%s  %.1f heartbeats/s  sent %d  errors %d  p50 %.2fms  p99 %.2fms",
		elapsed.Truncate(time.Second), r.opts.Duration, rate, sent, r.failed.Load(),
		ms(r.lat.quantile(0.50)), ms(r.lat.quantile(0.99)))
}
