package alert

// Waiting makes d report each destination that finished a round and waits
// on its clock; call it before Run.
func (d *Dispatcher) Waiting() <-chan string {
	ch := make(chan string, 1000)
	d.waiting = ch
	return ch
}

// Running reports whether a Run is in progress.
func (d *Dispatcher) Running() bool { return d.running.Load() }
