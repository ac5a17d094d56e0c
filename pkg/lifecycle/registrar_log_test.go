package lifecycle_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
)

// logLine is what TestHeartbeatLogLevels reads of a log line.
type logLine struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	ServerID   string `json:"server_id"`
	TraceID    string `json:"trace_id"`
	Status     string `json:"status"`
	FromStatus string `json:"from_status"`
}

// heartbeatLines returns the heartbeat lines written to logs since the
// offset, and the new offset.
func heartbeatLines(t *testing.T, logs *testlog.Buffer, from int) ([]logLine, int) {
	t.Helper()
	text := logs.String()
	var out []logLine
	for _, raw := range strings.Split(strings.TrimSpace(text[from:]), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if strings.Contains(l.Msg, "heartbeat") {
			out = append(out, l)
		}
	}
	return out, len(text)
}

// TestHeartbeatLogLevels: the logs do not grow with the fleet. A
// heartbeat is an info line, with the server's trace id, only when it is
// the first after a registration or it changes the status; every other
// heartbeat is a debug line.
func TestHeartbeatLogLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(start)
	store := memstore.New(clock)
	var logs testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	interval := 10 * time.Second
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, Logger: logger, HeartbeatInterval: interval})
	mon := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: store, Logger: logger, Clock: clock,
		HeartbeatInterval: interval, Period: time.Second, BlindAfter: -1})
	tenant := uuid.New()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	info := registry.ServerInfo{ModuleName: "calendar", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
		TraceID: trace}
	srv, _, err := reg.Register(ctx, tenant, info)
	if err != nil {
		t.Fatal(err)
	}
	beat := func(n int) {
		t.Helper()
		for range n {
			clock.Advance(interval / 2)
			if _, err := reg.Heartbeat(ctx, tenant, srv.ServerID); err != nil {
				t.Fatal(err)
			}
		}
	}
	expect := func(off int, want ...string) int {
		t.Helper()
		lines, next := heartbeatLines(t, &logs, off)
		var got []string
		for _, l := range lines {
			got = append(got, l.Level+" "+l.Msg)
			if l.ServerID != srv.ServerID.String() || l.TraceID != trace {
				t.Fatalf("heartbeat line of server %s trace %q, want %s and %s", l.ServerID, l.TraceID, srv.ServerID, trace)
			}
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("heartbeat lines:\n got %q\nwant %q", got, want)
		}
		return next
	}

	// Registration, then three heartbeats: the first at info level.
	off := expect(0)
	beat(3)
	off = expect(off, "INFO first heartbeat", "DEBUG heartbeat", "DEBUG heartbeat")

	// Silent past unhealthy; the heartbeat that recovers it is an info line
	// with both statuses, the next one a debug line again.
	clock.Advance(registry.UnhealthyAfter(interval) + time.Second)
	if _, err := mon.Sweep(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	beat(2)
	lines, _ := heartbeatLines(t, &logs, off)
	if len(lines) == 0 || lines[0].FromStatus != string(registry.StatusUnhealthy) || lines[0].Status != string(registry.StatusHealthy) {
		t.Fatalf("recovery line %+v, want from unhealthy to healthy", lines)
	}
	off = expect(off, "INFO heartbeat changed status", "DEBUG heartbeat")

	// A re-registration makes the next heartbeat a first one again.
	if _, _, err := reg.Register(ctx, tenant, info); err != nil {
		t.Fatal(err)
	}
	beat(2)
	expect(off, "INFO first heartbeat", "DEBUG heartbeat")
}
