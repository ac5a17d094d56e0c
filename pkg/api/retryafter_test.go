package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

// TestServiceUnavailableRetryAfterJittered: every 503 carries a Retry-After
// of 1 to 3 seconds, drawn for each answer, so that a fleet that honours it
// does not come back in lockstep (it was always 1).
func TestServiceUnavailableRetryAfterJittered(t *testing.T) {
	t.Parallel()
	b := setup(t) // serves no change feed: the watch is a 503
	seen := map[int]int{}
	for range 200 {
		resp := b.get(t, "/v1/mcp/watch")
		if resp.code != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503: %s", resp.code, resp.body)
		}
		secs, err := strconv.Atoi(resp.header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 3 {
			t.Fatalf("Retry-After %q, want whole seconds from 1 to 3", resp.header.Get("Retry-After"))
		}
		seen[secs]++
	}
	if len(seen) != 3 {
		t.Fatalf("Retry-After of 200 answers: %v, want each of 1, 2 and 3", seen)
	}
}

// retryAfterOneToThree reports whether h is a 503's Retry-After: 1, 2 or 3.
func retryAfterOneToThree(h string) bool {
	return h == "1" || h == "2" || h == "3"
}

// Every 503 of the MCP registry API carries the Retry-After too, the reads
// of one server and its versions among them (a black-box run found those
// without it).
func TestRegistryUnavailableRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{store: func(clock clockwork.Clock) testStore {
		return &faultStore{Store: memstore.New(clock), err: fmt.Errorf("catalog: %w: connection refused", registry.ErrUnavailable)}
	}})
	for _, path := range []string{
		"/v0.1/servers",
		"/v0.1/servers/local.mcpd%2Fcal/versions",
		"/v0.1/servers/local.mcpd%2Fcal/versions/latest",
		"/v0.1/servers/local.mcpd%2Fcal/versions/1.0.0",
	} {
		resp := b.get(t, path)
		if resp.code != http.StatusServiceUnavailable || !retryAfterOneToThree(resp.header.Get("Retry-After")) {
			t.Fatalf("%s: status %d, Retry-After %q; want 503 with 1 to 3: %s", path, resp.code, resp.header.Get("Retry-After"), resp.body)
		}
	}
}

// A lasting outage is met by every request: the 503s are all counted, but
// logged once per route and ten seconds, each record saying how many were
// left out since the last (a Citus worker stopped for 30 s logged 2,041
// warnings on one replica).
func TestStoreUnavailableLoggedOncePerInterval(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{clockedHandler: true, store: func(clock clockwork.Clock) testStore {
		return &faultStore{Store: memstore.New(clock), err: fmt.Errorf("heartbeat: %w: connection refused", registry.ErrUnavailable)}
	}})
	heartbeats := func(n int) {
		for range n {
			wantProblem(t, b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+uuid.NewString()+`"}`), 503, "")
		}
	}
	records := func() []string { return b.logs.Lines(`"msg":"store unavailable"`) }
	heartbeats(50)
	if got := records(); len(got) != 1 || strings.Contains(got[0], `"suppressed"`) {
		t.Fatalf("50 refused heartbeats within a second: %d records, want 1 without suppressed:\n%s", len(got), strings.Join(got, "\n"))
	}
	// Another route's refusal is a record of its own.
	wantProblem(t, b.get(t, "/v1/mcp/servers/"+uuid.NewString()), 503, "")
	if got := records(); len(got) != 2 || !strings.Contains(got[1], `"path":"/v1/mcp/servers/`) {
		t.Fatalf("a refused read after the heartbeats: %d records, want 2, the second of its path:\n%s", len(got), strings.Join(got, "\n"))
	}
	b.clock.Advance(9 * time.Second)
	heartbeats(1)
	if got := records(); len(got) != 2 {
		t.Fatalf("a heartbeat 9 s later: %d records, want still 2", len(got))
	}
	b.clock.Advance(time.Second)
	heartbeats(1)
	if got := records(); len(got) != 3 || !strings.Contains(got[2], `"suppressed":50`) {
		t.Fatalf("a heartbeat 10 s later: %d records, want 3, the last with suppressed 50:\n%s", len(got), strings.Join(got, "\n"))
	}
	if metrics := string(b.get(t, "/metrics").body); !strings.Contains(metrics, "mcpd_store_errors_total 53") {
		t.Fatalf("the 503s are not all counted:\n%s", grepLines(metrics, "mcpd_store_errors_total"))
	}
}
