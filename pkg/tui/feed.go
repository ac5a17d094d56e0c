package tui

import (
	"context"
	"errors"
	"sync"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/cyberos/mcpd/pkg/registry"
)

// ErrCursorExpired is what Source.Watch returns when the API can no longer
// resume from the cursor (410): the board lists again.
var ErrCursorExpired = errors.New("the watch cursor expired")

// maxPending bounds the events waiting for the board: past it the watch
// waits (and the API, if the wait lasts, drops and later resumes it).
const maxPending = 10_000

// feedPipe carries one watch's events and states from the goroutine that
// reads the stream to the board, in batches: the board takes whatever
// arrived since it last looked, so a burst costs one update, not one per
// event.
type feedPipe struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	pending   []registry.Event
	state     error // the last state the stream reported; nil: live
	stateSeen bool  // a state was reported since the last take
	ended     bool
	endErr    error

	ready chan struct{} // cap 1: something to take
	room  chan struct{} // cap 1: the board took a batch
}

func newFeedPipe(parent context.Context) *feedPipe {
	ctx, cancel := context.WithCancel(parent)
	return &feedPipe{ctx: ctx, cancel: cancel, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// push queues an event, waiting while maxPending are queued.
func (p *feedPipe) push(ev registry.Event) error {
	for {
		p.mu.Lock()
		if len(p.pending) < maxPending {
			p.pending = append(p.pending, ev)
			p.mu.Unlock()
			signal(p.ready)
			return nil
		}
		p.mu.Unlock()
		select {
		case <-p.room:
		case <-p.ctx.Done():
			return p.ctx.Err()
		}
	}
}

// setState records that the stream is live (nil) or reconnecting.
func (p *feedPipe) setState(err error) {
	p.mu.Lock()
	p.state, p.stateSeen = err, true
	p.mu.Unlock()
	signal(p.ready)
}

// end records that the watch returned, with its error.
func (p *feedPipe) end(err error) {
	p.mu.Lock()
	p.ended, p.endErr = true, err
	p.mu.Unlock()
	signal(p.ready)
}

// take returns everything that arrived since the last take.
func (p *feedPipe) take() feedMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := feedMsg{pipe: p, events: p.pending, state: p.state, stateSeen: p.stateSeen, ended: p.ended, err: p.endErr}
	p.pending, p.stateSeen = nil, false
	signal(p.room)
	return msg
}

// wait is the command that delivers the next batch.
func (p *feedPipe) wait() tea.Cmd {
	return func() tea.Msg {
		select {
		case <-p.ready:
		case <-p.ctx.Done():
			// Canceled by the board (a new list, quitting): nobody waits
			// for this pipe any more.
			return nil
		}
		return p.take()
	}
}

// run is the command that follows the feed from cursor until the pipe is
// canceled or the API refuses; its end reaches the board through wait.
func (p *feedPipe) run(src Source, cursor string) tea.Cmd {
	return func() tea.Msg {
		p.end(src.Watch(p.ctx, cursor, p.push, p.setState))
		return nil
	}
}

// feedMsg is one batch of a watch: its events in commit order, its latest
// state, and whether it ended.
type feedMsg struct {
	pipe      *feedPipe
	events    []registry.Event
	state     error
	stateSeen bool
	ended     bool
	err       error
}
