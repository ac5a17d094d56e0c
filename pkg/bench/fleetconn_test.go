package bench

import (
	"context"
	"encoding/json"
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
	// A first round, then about 3 heartbeats each in the 300 ms window.
	if res.Load.Calls < 40 || res.Load.Calls > 80 {
		t.Fatalf("%d heartbeats measured, want about 60", res.Load.Calls)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.beats) != 20 {
		t.Fatalf("%d servers heartbeated, want 20", len(fs.beats))
	}
	for n := 1; n <= 20; n++ {
		if got := fs.beats[ServerID(n).String()]; got < 3 || got > 5 {
			t.Fatalf("server %d heartbeated %d times, want 1 + about 3", n, got)
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
	if res.Connected != 0 || res.Load.Errors < 20 || !strings.Contains(res.Load.FirstError, "healthy") {
		t.Fatalf("connected %d, errors %d (%q); want every heartbeat failed for its status", res.Connected,
			res.Load.Errors, res.Load.FirstError)
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
