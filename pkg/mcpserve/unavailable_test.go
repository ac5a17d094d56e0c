package mcpserve_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

// downStore is a store that cannot read tenant down's position, nor,
// once unreadable (when not nil) is set, tenant unread's skills, as when
// its database or its Citus worker is down.
type downStore struct {
	testStore
	down, unread uuid.UUID
	unreadable   *atomic.Bool
}

func (s downStore) FindSkills(ctx context.Context, tenant uuid.UUID, f registry.SkillFilter) (registry.SkillPage, error) {
	if tenant == s.unread && s.unreadable != nil && s.unreadable.Load() {
		return registry.SkillPage{}, registry.ErrUnavailable
	}
	return s.testStore.FindSkills(ctx, tenant, f)
}

func (s downStore) Horizon(ctx context.Context, tenant uuid.UUID) (registry.Position, error) {
	if tenant == s.down {
		return registry.Position{}, registry.ErrUnavailable
	}
	return s.testStore.Horizon(ctx, tenant)
}

// TestUnavailableAnswersTheCallsID: a call that /mcp refuses because the
// tenant's store cannot answer is 503 with Retry-After, and its JSON-RPC
// error carries the call's own id (JSON-RPC 2.0 allows a null id only when
// the request's cannot be read); a notification's refusal has none.
func TestUnavailableAnswersTheCallsID(t *testing.T) {
	t.Parallel()
	down := uuid.New()
	e := setup(t, envOptions{store: func(_ testing.TB, clock clockwork.Clock) testStore {
		return downStore{testStore: memstore.New(clock), down: down}
	}})
	token := e.token(t, down, "mcp:read")
	for _, c := range []struct {
		rev, body string
		id        any // as JSON decodes it
	}{
		{"", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
			`"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, float64(7)},
		{rev2026, `{"jsonrpc":"2.0","id":"call-8","method":"tools/list","params":{` + meta2026 + `}}`, "call-8"},
		{rev2025, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil},
	} {
		a := e.send(t, token, c.rev, "", c.body)
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
			t.Fatalf("%s with the tenant's store down: %d, Retry-After %q: %s; want 503 with Retry-After",
				c.body, a.status, a.header.Get("Retry-After"), a.raw)
		}
		if id, ok := a.msg["id"]; !ok || id != c.id {
			t.Fatalf("%s: the refusal's id is %#v (present %v), want %#v: %s", c.body, id, ok, c.id, a.raw)
		}
	}
	// Another tenant is served.
	if a := e.send(t, e.token(t, uuid.New(), "mcp:read"), rev2026,
		"", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta2026+`}}`); a.status != http.StatusOK {
		t.Fatalf("another tenant's tools/list: %d %s", a.status, a.raw)
	}
}

// TestResourceReadUnavailable: a resource read that the store cannot
// answer is a JSON-RPC error of the server's range (-32000) with the call's
// id, its message saying nothing of the cause; a tool call in the same
// case is a tool error (isError), as the contract's tools are.
func TestResourceReadUnavailable(t *testing.T) {
	t.Parallel()
	unread, unreadable := uuid.New(), new(atomic.Bool)
	e := setup(t, envOptions{store: func(_ testing.TB, clock clockwork.Clock) testStore {
		return downStore{testStore: memstore.New(clock), unread: unread, unreadable: unreadable}
	}})
	token := e.token(t, unread, "mcp:read")
	session := e.initialize(t, token)
	unreadable.Store(true)
	a := e.send(t, token, rev2025, session, `{"jsonrpc":"2.0","id":11,"method":"resources/read","params":{"uri":"mcpd://skills/search"}}`)
	rpcErr, _ := a.msg["error"].(map[string]any)
	if a.msg["id"] != float64(11) || rpcErr == nil || rpcErr["code"] != float64(-32000) ||
		a.message() != "find skill: the registry is unavailable; try again" {
		t.Fatalf("resources/read with the store down: %d %s; want error -32000 of id 11", a.status, a.raw)
	}
	a = e.send(t, token, rev2025, session, `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"find_skill","arguments":{"skill":"search"}}}`)
	if res, _ := a.msg["result"].(map[string]any); a.msg["id"] != float64(12) || res == nil || res["isError"] != true {
		t.Fatalf("find_skill with the store down: %d %s; want a tool error", a.status, a.raw)
	}
}
