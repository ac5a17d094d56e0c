package daemon

import "context"

// background is one goroutine the daemon runs until it stops: the hub of
// the change feed, the alert dispatcher, the systemd watchdog.
type background struct {
	cancel context.CancelFunc
	done   chan error
}

// startBackground runs run in a goroutine with a context that stop
// cancels; parent's cancellation does not reach it (the daemon decides
// when it stops).
func startBackground(parent context.Context, run func(context.Context) error) *background {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	b := &background{cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- run(ctx) }()
	return b
}

// stop cancels the goroutine's context and waits for it to return; its
// error is run's. A nil background stops at once.
func (b *background) stop() error {
	if b == nil {
		return nil
	}
	b.cancel()
	return <-b.done
}
