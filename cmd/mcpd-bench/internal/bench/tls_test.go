package bench

import (
	"crypto/tls"
	"net"
	"testing"
)

// BenchmarkTLSHandshake is the CPU of one TLS handshake, both sides in
// this process over net.Pipe (run with -cpu 1 for CPU per handshake):
// full with Go's default key exchange (X25519MLKEM768), full with X25519
// only (GODEBUG=tlsmlkem=0 does the same), and resumed from a session
// ticket (TLS 1.3 resumption still does a key exchange).
func BenchmarkTLSHandshake(b *testing.B) {
	certFile, keyFile, client, err := WriteServerCertificate(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		b.Fatal(err)
	}
	server := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	client.ServerName = "127.0.0.1"
	handshake := func(b *testing.B, client *tls.Config) bool {
		c, s := net.Pipe()
		defer func() { _ = c.Close(); _ = s.Close() }()
		done := make(chan error, 1)
		go func() {
			ts := tls.Server(s, server)
			if err := ts.Handshake(); err != nil {
				done <- err
				return
			}
			// One byte after the session ticket, which the client takes on
			// its way to the byte.
			_, err := ts.Write([]byte{0})
			done <- err
		}()
		tc := tls.Client(c, client)
		if err := tc.Handshake(); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := tc.Read(buf); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return tc.ConnectionState().DidResume
	}
	run := func(name string, cfg func() *tls.Config, wantResumed bool) {
		b.Run(name, func(b *testing.B) {
			shared := cfg()
			handshake(b, shared) // a session to resume, when cached
			for b.Loop() {
				c := shared
				if !wantResumed {
					c = cfg()
				}
				if got := handshake(b, c); got != wantResumed {
					b.Fatalf("resumed %v, want %v", got, wantResumed)
				}
			}
		})
	}
	run("full-default", func() *tls.Config { return client.Clone() }, false)
	run("full-x25519", func() *tls.Config {
		c := client.Clone()
		c.CurvePreferences = []tls.CurveID{tls.X25519}
		return c
	}, false)
	run("resumed-default", func() *tls.Config {
		c := client.Clone()
		c.ClientSessionCache = tls.NewLRUClientSessionCache(1)
		return c
	}, true)
}
