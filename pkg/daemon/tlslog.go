package daemon

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cyberos/mcpd/pkg/internal/logsample"
)

// How many failed TLS handshakes are logged: the first handshakeLogBurst of
// each handshakeLogWindow; the next one logged says how many were left out.
// Every one is counted in mcpd_tls_handshake_errors_total.
const (
	handshakeLogBurst  = 5
	handshakeLogWindow = time.Minute
)

// Reasons of mcpd_tls_handshake_errors_total, a closed set.
const (
	reasonNoClientCert  = "no_client_certificate"
	reasonBadClientCert = "bad_client_certificate"
	reasonNotTLS        = "not_tls"
	reasonUnsupported   = "unsupported"
	reasonClosed        = "closed"
	reasonTimeout       = "timeout"
	reasonOther         = "other"
)

var handshakeReasons = []string{reasonNoClientCert, reasonBadClientCert, reasonNotTLS, reasonUnsupported,
	reasonClosed, reasonTimeout, reasonOther}

// handshakePrefix starts net/http's line for a failed TLS handshake.
const handshakePrefix = "http: TLS handshake error from "

// serverErrorLog is the http.Server's error log: failed TLS handshakes are
// counted by reason and sampled into the log, so that clients failing in a
// loop (no client certificate under mTLS, a scanner) cannot fill it; every
// other line is logged at warn level as it comes.
type serverErrorLog struct {
	logger *slog.Logger
	errors *prometheus.CounterVec // nil without TLS

	// handshakes samples the failed handshakes' lines.
	handshakes *logsample.Sampler
}

// newServerErrorLog returns the error log; reg, when not nil, gets the
// handshake counter (with TLS only).
func newServerErrorLog(logger *slog.Logger, clock clockwork.Clock, reg prometheus.Registerer) *serverErrorLog {
	l := &serverErrorLog{logger: logger, handshakes: logsample.New(handshakeLogWindow, handshakeLogBurst, clock.Now)}
	if reg != nil {
		l.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_tls_handshake_errors_total",
			Help: "TLS handshakes that failed, by reason.",
		}, []string{"reason"})
		for _, r := range handshakeReasons {
			l.errors.WithLabelValues(r)
		}
		reg.MustRegister(l.errors)
	}
	return l
}

// stdLogger returns a *log.Logger writing to l, for http.Server.ErrorLog.
func (l *serverErrorLog) stdLogger() *log.Logger { return log.New(l, "", 0) }

// Write takes one line of net/http.
func (l *serverErrorLog) Write(p []byte) (int, error) {
	msg := string(bytes.TrimRight(p, "\n"))
	rest, ok := strings.CutPrefix(msg, handshakePrefix)
	if !ok {
		l.logger.Warn(msg)
		return len(p), nil
	}
	remote, cause, _ := strings.Cut(rest, ": ")
	reason := handshakeReason(cause)
	if l.errors != nil {
		l.errors.WithLabelValues(reason).Inc()
	}
	l.handshakes.Warn(context.Background(), l.logger, "TLS handshake error",
		"remote_addr", remote, "reason", reason, "err", cause)
	return len(p), nil
}

// handshakeReason sorts the error of a failed handshake, as crypto/tls and
// net word it, into a reason of mcpd_tls_handshake_errors_total.
func handshakeReason(cause string) string {
	switch {
	case strings.Contains(cause, "didn't provide a certificate"):
		return reasonNoClientCert
	case strings.Contains(cause, "certificate"), strings.Contains(cause, "unknown authority"):
		return reasonBadClientCert
	case strings.Contains(cause, "does not look like a TLS handshake"):
		return reasonNotTLS
	case strings.Contains(cause, "unsupported"), strings.Contains(cause, "no cipher suite"),
		strings.Contains(cause, "no mutual"), strings.Contains(cause, "protocol version"):
		return reasonUnsupported
	case strings.Contains(cause, "timeout"):
		return reasonTimeout
	case strings.Contains(cause, "EOF"), strings.Contains(cause, "reset by peer"), strings.Contains(cause, "broken pipe"):
		return reasonClosed
	}
	return reasonOther
}
