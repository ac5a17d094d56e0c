package pgstore

import (
	"context"
	"sync"
)

// background is work that a part of the Store runs in the background
// until Close ends it and waits for it. The owner's mutex guards closed
// and every call of run.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	tasks  sync.WaitGroup
	// closed is set by stop: run is not called after it.
	closed bool
}

// init prepares b; Store.New calls it.
func (b *background) init() {
	b.ctx, b.cancel = context.WithCancel(context.Background())
}

// run runs f on a context that ends at stop; the owner's mutex is held,
// and b is not closed.
func (b *background) run(f func(ctx context.Context)) {
	b.tasks.Go(func() { f(b.ctx) })
}

// stop marks b closed under its owner's mutex mu, ends its context and
// waits for its work.
func (b *background) stop(mu *sync.Mutex) {
	mu.Lock()
	b.closed = true
	mu.Unlock()
	b.cancel()
	b.tasks.Wait()
}
