package alert

// Waiting makes d report each destination that finished a round and waits
// on its clock; call it before Run.
func (d *Dispatcher) Waiting() <-chan string {
	ch := make(chan string, 1000)
	d.waiting = ch
	return ch
}
