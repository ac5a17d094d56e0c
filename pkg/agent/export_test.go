package agent

import "time"

// Waiting makes a report the length of each wait on its clock as the wait
// begins; call it before Run.
func (a *Agent) Waiting() <-chan time.Duration {
	ch := make(chan time.Duration, 1000)
	a.waiting = ch
	return ch
}
