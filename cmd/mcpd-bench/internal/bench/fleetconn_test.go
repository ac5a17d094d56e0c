package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fleetServer answers heartbeats as mcpd does, counting them per server
// and the connections they came on.
type fleetServer struct {
	mu      sync.Mutex
	beats   map[string]int
	conns   map[string]bool
	healthy bool
}

func (s *fleetServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ServerID string `json:"server_id"`
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/mcp/servers/heartbeat" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || json.NewDecoder(r.Body).Decode(&body) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.beats[body.ServerID]++
	s.conns[r.RemoteAddr] = true
	s.mu.Unlock()
	status := "healthy"
	if !s.healthy {
		status = "unhealthy"
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"server_id":"` + body.ServerID + `","status":"` + status + `"}`))
}

func runFleet(t *testing.T, healthy bool) (*fleetServer, FleetConnResult) {
	t.Helper()
	fs := &fleetServer{beats: map[string]int{}, conns: map[string]bool{}, healthy: healthy}
	ts := httptest.NewServer(fs)
	defer ts.Close()
	res, err := FleetConns(context.Background(), FleetConnOptions{BaseURL: ts.URL, PID: os.Getpid(),
		Secret: []byte("0123456789abcdef0123456789abcdef"), Conns: 20, Modules: 7,
		Interval: 100 * time.Millisecond, Jitter: 0.05, Duration: 300 * time.Millisecond, MaxCalls: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return fs, res
}

func TestFleetConnsOneConnectionPerServerOnSchedule(t *testing.T) {
	fs, res := runFleet(t, true)
	if res.Connected != 20 || res.Load.Errors != 0 {
		t.Fatalf("connected %d, errors %d (%s); want 20 and none", res.Connected, res.Load.Errors, res.Load.FirstError)
	}
	// A first round, a settling interval, then about 3 heartbeats each in
	// the 300 ms window.
	if res.Load.Calls < 40 || res.Load.Calls > 80 {
		t.Fatalf("%d heartbeats measured, want about 60", res.Load.Calls)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.beats) != 20 {
		t.Fatalf("%d servers heartbeated, want 20", len(fs.beats))
	}
	for n := 1; n <= 20; n++ {
		if got := fs.beats[ServerID(n).String()]; got < 4 || got > 6 {
			t.Fatalf("server %d heartbeated %d times, want 1 + 1 settling + about 3", n, got)
		}
	}
	if len(fs.conns) != 20 {
		t.Fatalf("%d connections, want one per server", len(fs.conns))
	}
	if res.Load.P50 <= 0 || res.Load.P999 < res.Load.P50 || res.Load.OfferedRate != 200 {
		t.Fatalf("implausible result %+v", res.Load)
	}
}

func TestFleetConnsCountsBadAnswers(t *testing.T) {
	_, res := runFleet(t, false)
	if res.Connected != 0 || res.Connect.Load.Errors != 20 || !strings.Contains(res.Connect.Load.FirstError, "healthy") {
		t.Fatalf("connected %d, first round errors %d (%q); want every first heartbeat failed for its status", res.Connected,
			res.Connect.Load.Errors, res.Connect.Load.FirstError)
	}
	if res.Load.Errors < 20 || res.Retries != 0 {
		t.Fatalf("%d errors and %d retries in the window; want every heartbeat failed, none sent again (an answer is final)",
			res.Load.Errors, res.Retries)
	}
}

// TestFleetConnsOverTLSResumesAndSurvivesARestart runs a TLS fleet with
// its two rounds: every connection reopened (resuming its session), then
// the server replaced on the same address (new session keys: full
// handshakes), every heartbeat answered.
func TestFleetConnsOverTLSResumesAndSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, client, err := WriteServerCertificate(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	fs := &fleetServer{beats: map[string]int{}, conns: map[string]bool{}, healthy: true}
	serve := func(addr string) *http.Server {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: fs, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}})) }()
		return srv
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	srv := serve(addr)
	defer func() { _ = srv.Close() }()
	restarted := false
	res, err := FleetConns(context.Background(), FleetConnOptions{BaseURL: "https://" + addr, PID: os.Getpid(),
		Secret: []byte("0123456789abcdef0123456789abcdef"), Conns: 20, Modules: 7, TLS: client,
		Client: &http.Client{Transport: &http.Transport{TLSClientConfig: client}},
		// Long enough for 20 handshakes under the race detector.
		Interval: 400 * time.Millisecond, Duration: 400 * time.Millisecond, MaxCalls: 1000,
		Jitter: 0, // one heartbeat of each server in each round
		Rounds: []FleetRound{
			{Name: "resume", Reconnect: true},
			{Name: "restart", Restart: func(context.Context) (int, error) {
				_ = srv.Close() // closes every connection, as mcpd's shutdown does
				srv = serve(addr)
				restarted = true
				return os.Getpid(), nil
			}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !restarted || len(res.Rounds) != 2 {
		t.Fatalf("restarted %v, %d rounds; want the restart run and 2 rounds", restarted, len(res.Rounds))
	}
	if res.Connected != 20 || res.Connect.Connects != 20 || res.Connect.Resumed != 0 {
		t.Fatalf("first round: %d connected, %d connects, %d resumed; want 20 full handshakes", res.Connected,
			res.Connect.Connects, res.Connect.Resumed)
	}
	if res.Connects != 0 || res.Load.Errors != 0 {
		t.Fatalf("measured window: %d connects, %d errors (%s); want keep-alive and no error", res.Connects,
			res.Load.Errors, res.Load.FirstError)
	}
	// A heartbeat due at a round's edge may run across it (the restart
	// comes when the coordinator wakes): up to 2 of the 20 may land in the
	// neighbouring round's way.
	const edge = 2
	resume, restart := res.Rounds[0], res.Rounds[1]
	if resume.Connects < 20 || resume.Resumed < 20-edge || resume.Load.Errors != 0 {
		t.Fatalf("resume round: %d connects, %d resumed, %d errors (%s); want 20 resumed sessions",
			resume.Connects, resume.Resumed, resume.Load.Errors, resume.Load.FirstError)
	}
	if restart.Connects < 20-edge || restart.Resumed > edge || restart.Load.Errors != 0 || restart.Retries < 20-edge {
		t.Fatalf("restart round: %d connects, %d resumed, %d errors (%s), %d retries; want 20 full handshakes after a failed send each",
			restart.Connects, restart.Resumed, restart.Load.Errors, restart.Load.FirstError, restart.Retries)
	}
}

func TestFleetConnFits(t *testing.T) {
	if why := FleetConnFits(10); why != "" {
		t.Fatalf("10 connections do not fit: %s", why)
	}
	if why := FleetConnFits(1 << 40); !strings.Contains(why, "ulimit -Hn") {
		t.Fatalf("FleetConnFits(2^40) = %q, want the open-file limit named", why)
	}
}
