package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"
)

// notifier speaks systemd's notify protocol: one datagram of
// newline-separated VAR=value assignments to the unix socket named by
// NOTIFY_SOCKET ("@name" is an abstract socket). Outside systemd (no
// NOTIFY_SOCKET) it does nothing.
type notifier struct {
	socket   string
	watchdog time.Duration // WATCHDOG_USEC; zero: no watchdog for this process
	logger   *slog.Logger
}

func newNotifier(getenv func(string) string, logger *slog.Logger) *notifier {
	n := &notifier{socket: getenv("NOTIFY_SOCKET"), logger: logger}
	if n.socket == "" {
		return n
	}
	if usec, err := strconv.ParseInt(getenv("WATCHDOG_USEC"), 10, 64); err == nil && usec > 0 {
		pid := getenv("WATCHDOG_PID")
		if pid == "" || pid == strconv.Itoa(os.Getpid()) {
			n.watchdog = time.Duration(usec) * time.Microsecond
		}
	}
	return n
}

// notify sends state; a failure is logged, never fatal.
func (n *notifier) notify(state string) {
	if n.socket == "" {
		return
	}
	addr := &net.UnixAddr{Name: n.socket, Net: "unixgram"}
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		n.logger.Warn("sd_notify", "socket", n.socket, "err", err)
		return
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		n.logger.Warn("sd_notify", "socket", n.socket, "err", err)
	}
}

// runWatchdog sends WATCHDOG=1 every half watchdog period until ctx ends;
// the daemon runs it only when systemd set a watchdog.
func (n *notifier) runWatchdog(ctx context.Context) error {
	t := time.NewTicker(n.watchdog / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n.notify("WATCHDOG=1")
		}
	}
}
