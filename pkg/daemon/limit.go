package daemon

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// connLimiter caps the connections a listener has open: Accept waits for
// a free slot, so that excess connections wait in the kernel's backlog
// instead of taking file descriptors. While a connection waits, idle
// keep-alive connections are closed to make room (their clients reconnect
// on their next request), so that a fleet of idle clients cannot starve
// new ones such as health checks.
type connLimiter struct {
	net.Listener
	slots   chan struct{}
	closed  chan struct{}
	once    sync.Once
	waiting atomic.Int32

	mu   sync.Mutex
	idle map[net.Conn]struct{}
}

// newConnLimiter wraps ln so that at most n of its connections are open.
func newConnLimiter(ln net.Listener, n int) *connLimiter {
	return &connLimiter{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{}),
		idle: map[net.Conn]struct{}{}}
}

// Accept waits for a free slot, then for a connection.
func (l *connLimiter) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.waiting.Add(1)
		l.closeOneIdle()
		select {
		case l.slots <- struct{}{}:
			l.waiting.Add(-1)
		case <-l.closed:
			l.waiting.Add(-1)
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and ends a wait in Accept.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// connState is the http.Server's ConnState hook: it keeps the set of idle
// connections, and closes one that goes idle while Accept waits.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s != http.StateIdle {
		delete(l.idle, c)
		return
	}
	if l.waiting.Load() > 0 {
		_ = c.Close()
		return
	}
	l.idle[c] = struct{}{}
}

// closeOneIdle closes an idle connection, if there is one.
func (l *connLimiter) closeOneIdle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.idle {
		delete(l.idle, c)
		_ = c.Close()
		return
	}
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the connection, as the HTTP server does before it
// closes one whose request it did not read to the end (a 431 for headers
// past MaxHeaderBytes, an answer to a body it did not read): the client
// then reads the whole answer and the end of the stream, before the close
// with its unread bytes resets the connection. Without it, a client got
// "connection reset by peer" instead of the answer.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// fdReserveBase is what mcpd keeps of the open-file limit besides the API's
// connections and the database pool: standard streams, key and TLS files,
// alert deliveries, the epoll and signal descriptors, with room to spare.
const fdReserveBase = 256

// connectionLimitError is a --max-connections that the open-file limit
// cannot hold: a setting to change, exit 2.
type connectionLimitError struct{ err error }

func (e *connectionLimitError) Error() string { return e.err.Error() }
func (e *connectionLimitError) Unwrap() error { return e.err }

// fitConnections checks the connection cap want against the open-file
// limit (soft, after raising it to the hard one) less reserve; the default
// cap is lowered to fit, a given one that does not fit is refused.
func fitConnections(want int, isDefault bool, limit uint64, reserve int) (int, error) {
	if limit >= uint64(want)+uint64(reserve) {
		return want, nil
	}
	room := 0
	if limit > uint64(reserve) {
		room = int(limit) - reserve
	}
	if room < 1 {
		return 0, &connectionLimitError{fmt.Errorf("--max-connections: the open-file limit %d leaves no room for connections beside the %d descriptors kept for the database pool and files: raise it (LimitNOFILE= in the systemd unit, ulimit -n)", limit, reserve)}
	}
	if isDefault {
		return room, nil
	}
	return 0, &connectionLimitError{fmt.Errorf("--max-connections %d does not fit the open-file limit %d less %d descriptors kept for the database pool and files: lower it to at most %d or raise the limit (LimitNOFILE= in the systemd unit, ulimit -n)", want, limit, reserve, room)}
}
