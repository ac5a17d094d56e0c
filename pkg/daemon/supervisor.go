package daemon

import (
	"context"
	"errors"
	"fmt"
)

// service is the one shape of the daemon's background work: Start returns
// once the work runs on its own; Stop ends it and waits for it, bounded by
// ctx where the work allows. The shape is the monitor's (lifecycle.Monitor
// has no other), because only it can say "finish the sweep in flight,
// unless the shutdown timeout ends first": a Run(ctx) loop has one signal,
// stop now. A loop that needs no such grace is written as Run(ctx) error
// (the feed's hub, the alert dispatcher with its skill reconciler, the
// systemd watchdog) and handed to the supervisor through runFunc, whose
// Stop cancels it and waits.
type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// supervisor starts the daemon's services and stops them, in the order
// they were started: the feed's hub first (watches end), then the monitor
// after its sweep in flight, then alert delivery, so that it is woken by
// the monitor's last transitions, then the watchdog.
type supervisor struct {
	started []named
}

type named struct {
	name string
	svc  service
}

// start starts svc and, when it started, has stop stop it.
func (s *supervisor) start(ctx context.Context, name string, svc service) error {
	if err := svc.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.started = append(s.started, named{name, svc})
	return nil
}

// stop stops every service started, whatever the others answer, and
// returns their errors. A second call does nothing.
func (s *supervisor) stop(ctx context.Context) error {
	var errs []error
	for _, n := range s.started {
		if err := n.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", n.name, err))
		}
	}
	s.started = nil
	return errors.Join(errs...)
}

// runner is a service of a Run(ctx) function: Start runs it in a goroutine
// with a context that only Stop cancels (the caller's cancellation does not
// reach it: the daemon decides when it stops); Stop cancels that context
// and waits for run to return, and returns its error.
type runner struct {
	run    func(context.Context) error
	cancel context.CancelFunc
	done   chan error
}

func runFunc(run func(context.Context) error) *runner { return &runner{run: run} }

func (r *runner) Start(ctx context.Context) error {
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan error, 1)
	go func() { r.done <- r.run(ctx) }()
	return nil
}

func (r *runner) Stop(context.Context) error {
	if r.done == nil {
		return nil
	}
	r.cancel()
	return <-r.done
}
