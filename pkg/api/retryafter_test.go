package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

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
