package alert

import "time"

// Waiting makes d report each destination that finished a round and waits
// on its clock; call it before Run.
func (d *Dispatcher) Waiting() <-chan string {
	ch := make(chan string, 1000)
	d.waiting = ch
	return ch
}

// Running reports whether a Run is in progress.
func (d *Dispatcher) Running() bool { return d.running.Load() }

// WithSlowSend returns opts with the time a send may take before the next
// rounds give up the claim while they send set to v.
func WithSlowSend(opts DispatcherOptions, v time.Duration) DispatcherOptions {
	opts.slowSend = v
	return opts
}
