package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// poll GETs path with If-None-Match tag ("" none) as b's tenant.
func (b *bundle) poll(t *testing.T, path, tag string) response {
	t.Helper()
	r := req{path: path}
	if tag != "" {
		r.header = map[string]string{"If-None-Match": tag}
	}
	resp := b.do(t, r)
	if resp.code != http.StatusOK && resp.code != http.StatusNotModified {
		t.Fatalf("GET %s: %d %s", path, resp.code, resp.body)
	}
	if resp.header.Get("ETag") == "" {
		t.Fatalf("GET %s: no ETag", path)
	}
	if resp.code == http.StatusNotModified && len(resp.body) != 0 {
		t.Fatalf("GET %s: 304 with a body %q", path, resp.body)
	}
	return resp
}

// settledTag polls until the answer's tag comes from the feed and stays
// put (the hub has read every write), and returns it.
func (b *bundle) settledTag(t *testing.T, path string) string {
	t.Helper()
	// A tag from the feed once the hub has read every write of this
	// handler (none pending), the same in two polls in a row.
	var tag string
	testwait.Eventually(t, "the feed's tag settles", func() bool {
		if b.hub != nil {
			v, err := b.hub.TenantVersion(t.Context(), b.tenant, b.store.(feed.LatestReader))
			if err != nil || len(v.Pending) > 0 {
				return false
			}
		}
		prev := tag
		tag = b.poll(t, path, "").header.Get("ETag")
		return strings.HasPrefix(tag, `"f`) && tag == prev
	})
	return tag
}

func (b *bundle) heartbeatOK(t *testing.T, id string) {
	t.Helper()
	if resp := b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+id+`"}`); resp.code != http.StatusOK {
		t.Fatalf("heartbeat: %d %s", resp.code, resp.body)
	}
}

// The tag from the feed: a repeated poll is 304; a heartbeat that changes
// nothing but lastHeartbeatAt keeps the tag; a registration (read at once,
// before the hub has read it) and a transition change it.
func TestRegistryETagFromFeed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{feed: true})
	srv := b.register(t, "calendar", "search")
	const list = "/v0.1/servers"
	const one = "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest"
	for _, path := range []string{list, one, "/v0.1/servers/local.mcpd%2Fcalendar/versions"} {
		tag := b.settledTag(t, path)
		if resp := b.poll(t, path, tag); resp.code != http.StatusNotModified || resp.header.Get("ETag") != tag {
			t.Fatalf("%s: repeated poll %d, ETag %q, want 304 %q", path, resp.code, resp.header.Get("ETag"), tag)
		}
		if resp := b.poll(t, path, `"other", W/`+tag); resp.code != http.StatusNotModified {
			t.Fatalf("%s: a list with the weak tag: %d", path, resp.code)
		}
	}
	tag := b.settledTag(t, list)
	if other := b.settledTag(t, list+"?limit=5"); other == tag {
		t.Fatalf("another query, the same tag %s", tag)
	}

	// Heartbeats that change nothing but lastHeartbeatAt: 304.
	b.clock.Advance(5 * time.Second)
	b.heartbeatOK(t, srv.ServerID.String())
	if resp := b.poll(t, list, tag); resp.code != http.StatusNotModified {
		t.Fatalf("after a heartbeat: %d, want 304", resp.code)
	}

	// A re-registration: the next poll is 200 with another tag, at once.
	b.post(t, registerPath, `{"module_name":"calendar","version":"1.3.2","supported_protocols":["2025-06-18"],
		"remotes":[{"type":"sse","url":"https://cal.example/sse"}]}`)
	resp := b.poll(t, list, tag)
	if resp.code != http.StatusOK || resp.header.Get("ETag") == tag || !strings.Contains(string(resp.body), "cal.example/sse") {
		t.Fatalf("after a re-registration: %d %q %s", resp.code, resp.header.Get("ETag"), resp.body)
	}
	tag = b.settledTag(t, list)

	// A transition by the monitor.
	b.sweep(t, 20*time.Second)
	resp = b.poll(t, list, tag)
	if resp.code != http.StatusOK || resp.header.Get("ETag") == tag {
		t.Fatalf("after degraded: %d %q", resp.code, resp.header.Get("ETag"))
	}
	tag = b.settledTag(t, list)
	b.sweep(t, 10*time.Second) // unhealthy: leaves the list
	resp = b.poll(t, list, tag)
	if resp.code != http.StatusOK || strings.Contains(string(resp.body), "calendar") {
		t.Fatalf("after unhealthy: %d %s", resp.code, resp.body)
	}
	// Another tenant's change does not change this tenant's tag.
	tag = b.settledTag(t, list)
	otherTok := b.issue(t, uuid.New(), "mcp:read mcp:write")
	b.do(t, req{method: http.MethodPost, path: registerPath, body: registerBody("other"), token: otherTok})
	if resp := b.poll(t, list, tag); resp.code != http.StatusNotModified {
		t.Fatalf("after another tenant's registration: %d", resp.code)
	}
}

// Without a feed the tag is the answer's own, lastHeartbeatAt left out.
func TestRegistryETagFromContent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar")
	const list = "/v0.1/servers?limit=1"
	b.register(t, "mail")
	tag := b.poll(t, list, "").header.Get("ETag")
	if !strings.HasPrefix(tag, `"c`) {
		t.Fatalf("tag %s, want one made from the answer", tag)
	}
	b.clock.Advance(5 * time.Second)
	b.heartbeatOK(t, srv.ServerID.String())
	if resp := b.poll(t, list, tag); resp.code != http.StatusNotModified {
		t.Fatalf("after a heartbeat: %d", resp.code)
	}
	b.post(t, registerPath, `{"module_name":"calendar","version":"1.4.0","supported_protocols":["2025-06-18"]}`)
	if resp := b.poll(t, list, tag); resp.code != http.StatusOK || resp.header.Get("ETag") == tag {
		t.Fatalf("after a re-registration: %d %q", resp.code, resp.header.Get("ETag"))
	}
}

// Two replicas (two handlers, each with its own hub, over one store) give
// the same tag once both have read the same events.
func TestRegistryETagAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := setup(t, setupOptions{feed: true})
	b := setup(t, setupOptions{feed: true, store: func(clockwork.Clock) testStore { return a.store.(testStore) }})
	b.tenant, b.token = a.tenant, a.token
	a.register(t, "calendar")
	const list = "/v0.1/servers"
	// Until a's hub reads a's own write, a's tag counts it apart; once both
	// hubs have read it, the tags are one. Two equal polls of one replica
	// in a row can both come before its hub's read, so the agreement
	// itself is what is waited for.
	agreed := func(what string) string {
		t.Helper()
		var ta, tb string
		testwait.Eventually(t, what, func() bool {
			ta, tb = a.poll(t, list, "").header.Get("ETag"), b.poll(t, list, "").header.Get("ETag")
			return strings.HasPrefix(ta, `"f`) && ta == tb
		})
		return ta
	}
	first := agreed("the replicas agree")
	b.register(t, "mail") // through b: a learns it from its feed
	if second := agreed("the replicas agree after a write"); second == first {
		t.Fatalf("the tag %s did not change with a registration", first)
	}
}
