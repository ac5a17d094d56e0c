package daemon

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTLSCheckInterval is how often the TLS files are looked at for a
// change: new connections get a new certificate at most this long after it
// was written (the contract allows 10 s).
const DefaultTLSCheckInterval = 5 * time.Second

// maxTLSFileBytes bounds each of the certificate, key and CA files.
const maxTLSFileBytes = 1 << 20

// tlsFiles are the contents of the certificate, key and client CA files.
type tlsFiles struct{ cert, key, ca []byte }

func (a tlsFiles) equal(b tlsFiles) bool {
	return bytes.Equal(a.cert, b.cert) && bytes.Equal(a.key, b.key) && bytes.Equal(a.ca, b.ca)
}

// tlsReloader serves the TLS configuration of the listener from the
// certificate, key and client CA files, re-reading them when they change
// (looked at on a handshake at most every interval) and on Reload. A new
// pair that does not load keeps the previous one in service.
type tlsReloader struct {
	certFile, keyFile, caFile string
	logger                    *slog.Logger
	clock                     clockwork.Clock
	interval                  time.Duration

	expiry   prometheus.Gauge
	reloads  prometheus.Counter
	failures prometheus.Counter

	mu        sync.Mutex
	current   *tls.Config // what new connections get
	loaded    tlsFiles    // the contents current was made from
	bad       tlsFiles    // the last contents that failed, not reported twice
	badErr    string      // and how they failed
	nextCheck time.Time
}

// newTLSReloader loads the files once: an error here stops the start.
func newTLSReloader(certFile, keyFile, caFile string, logger *slog.Logger, clock clockwork.Clock,
	interval time.Duration, reg prometheus.Registerer) (*tlsReloader, error) {
	r := &tlsReloader{
		certFile: certFile, keyFile: keyFile, caFile: caFile,
		logger: logger, clock: clock, interval: interval,
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpd_tls_certificate_expiry_timestamp_seconds",
			Help: "When the certificate the API serves expires (Unix time).",
		}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_tls_reloads_total",
			Help: "Certificate, key and client CA files loaded again after a change or SIGHUP.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_tls_reload_failures_total",
			Help: "Changed or SIGHUP-reloaded TLS files that did not load; the previous certificate stays in service.",
		}),
	}
	if r.interval <= 0 {
		r.interval = DefaultTLSCheckInterval
	}
	files, err := r.read()
	if err == nil {
		err = r.apply(files)
	}
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	reg.MustRegister(r.expiry, r.reloads, r.failures)
	r.nextCheck = clock.Now().Add(r.interval)
	return r, nil
}

// serverConfig is the listener's configuration: TLS 1.2 or later, and each
// handshake gets the configuration of the files as last loaded.
func (r *tlsReloader) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.config(), nil
		},
	}
}

// config returns the configuration for a new connection, looking at the
// files first when the interval has passed since the last look.
func (r *tlsReloader) config() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.clock.Now(); !now.Before(r.nextCheck) {
		r.nextCheck = now.Add(r.interval)
		_ = r.reloadLocked(false)
	}
	return r.current
}

// Reload reads the files at once (SIGHUP) and reports whether they loaded.
func (r *tlsReloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextCheck = r.clock.Now().Add(r.interval)
	return r.reloadLocked(true)
}

// reloadLocked loads the files when they changed (or force); a failure is
// logged and counted once per content (every time when forced), and the
// previous pair stays.
func (r *tlsReloader) reloadLocked(force bool) error {
	files, err := r.read()
	if err == nil && !force && files.equal(r.loaded) {
		return nil
	}
	if err == nil {
		err = r.apply(files)
	}
	if err == nil {
		r.bad, r.badErr = tlsFiles{}, ""
		r.reloads.Inc()
		return nil
	}
	if !force && r.badErr == err.Error() && files.equal(r.bad) {
		return err
	}
	r.bad, r.badErr = files, err.Error()
	r.failures.Inc()
	r.logger.Error("TLS files not reloaded; the previous certificate stays in service", "err", err,
		"cert_file", r.certFile, "key_file", r.keyFile)
	return err
}

// read reads the three files.
func (r *tlsReloader) read() (tlsFiles, error) {
	var f tlsFiles
	var err error
	if f.cert, err = readSmallFile(r.certFile); err != nil {
		return f, err
	}
	if f.key, err = readSmallFile(r.keyFile); err != nil {
		return f, err
	}
	if r.caFile != "" {
		if f.ca, err = readSmallFile(r.caFile); err != nil {
			return f, err
		}
	}
	return f, nil
}

// apply makes the configuration of files current.
func (r *tlsReloader) apply(files tlsFiles) error {
	pair, err := tls.X509KeyPair(files.cert, files.key)
	if err != nil {
		return fmt.Errorf("%s and %s: %w", r.certFile, r.keyFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("%s: %w", r.certFile, err)
		}
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{pair},
	}
	if r.caFile != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(files.ca) {
			return fmt.Errorf("%s: no PEM certificate in it", r.caFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	r.current, r.loaded = cfg, files
	r.expiry.Set(float64(leaf.NotAfter.Unix()))
	log := r.logger.Info
	if now := r.clock.Now(); now.After(leaf.NotAfter) {
		log = r.logger.Warn
	}
	log("TLS certificate loaded", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339),
		"client_ca", r.caFile != "")
	return nil
}

// readSmallFile reads a file of at most maxTLSFileBytes.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTLSFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxTLSFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxTLSFileBytes)
	}
	return b, nil
}
