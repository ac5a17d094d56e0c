package storetest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"time"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Remotes, description and title: stored, returned by every read and
// write of the server and by skill discovery, replaced on re-registration,
// never in the audit trail.
var remotesCases = []testCase{
	{"remotes_everywhere", remotesEverywhere},
	{"remotes_replaced_on_reregister", remotesReplaced},
	{"remotes_none_is_empty", remotesNone},
	{"remotes_not_in_audit", remotesNotInAudit},
}

var testRemotes = []registry.Remote{
	{Type: registry.RemoteStreamableHTTP, URL: "https://calendar.internal.example:8443/mcp"},
	{Type: registry.RemoteSSE, URL: "http://10.0.0.7/sse?tenant=a"},
}

func (e *env) infoWithRemotes(module string, skills ...string) registry.ServerInfo {
	info := e.info(module, skills...)
	info.Remotes = append([]registry.Remote(nil), testRemotes...)
	info.Description = "Calendar of the team, with ünïcode"
	info.Title = "Calendar"
	return info
}

// wantRemotes checks what srv says of where it is reached.
func (e *env) wantRemotes(where string, srv registry.Server, remotes []registry.Remote, desc, title string) {
	e.t.Helper()
	if srv.Remotes == nil {
		e.t.Fatalf("%s: remotes nil, want a list ([] when none)", where)
	}
	if !reflect.DeepEqual(srv.Remotes, remotes) {
		e.t.Fatalf("%s: remotes\n got  %+v\n want %+v", where, srv.Remotes, remotes)
	}
	if srv.Description != desc || srv.Title != title {
		e.t.Fatalf("%s: description %q title %q, want %q %q", where, srv.Description, srv.Title, desc, title)
	}
}

func (e *env) wantSkillRemotes(remotes []registry.Remote) {
	e.t.Helper()
	page, err := e.store.FindSkills(e.ctx, e.tenant, registry.SkillFilter{})
	if err != nil {
		e.t.Fatalf("find skills: %v", err)
	}
	if len(page.Skills) == 0 {
		e.t.Fatalf("find skills: none")
	}
	for _, sk := range page.Skills {
		if sk.Remotes == nil || !reflect.DeepEqual(sk.Remotes, remotes) {
			e.t.Fatalf("skill %q of %q: remotes\n got  %+v\n want %+v", sk.Name, sk.ModuleName, sk.Remotes, remotes)
		}
	}
}

func remotesEverywhere(e *env) {
	info := e.infoWithRemotes("calendar", "book", "list")
	srv := e.registerNew(info)
	want := func(where string, s registry.Server) {
		e.t.Helper()
		e.wantRemotes(where, s, testRemotes, info.Description, info.Title)
	}
	want("register", srv)
	want("server", e.server(srv.ServerID))
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{})
	if err != nil || len(page.Servers) != 1 {
		e.t.Fatalf("servers: %d, %v", len(page.Servers), err)
	}
	want("servers", page.Servers[0])
	e.wantSkillRemotes(testRemotes)

	e.advance(Interval)
	hb, _ := e.heartbeat(srv.ServerID) // healthy, stays so
	want("heartbeat", hb)
	e.advance(35 * time.Second)
	e.sweep()
	e.wantStatus(srv.ServerID, registry.StatusUnhealthy)
	hb, ev := e.heartbeat(srv.ServerID) // recovery
	if ev == nil {
		e.t.Fatalf("heartbeat of an unhealthy server: no recovery event")
	}
	want("heartbeat (recovery)", hb)
	dr, _ := e.deregister(srv.ServerID)
	want("deregister", dr)
	dr, _ = e.deregister(srv.ServerID)
	want("deregister again", dr)
}

func remotesReplaced(e *env) {
	srv := e.registerNew(e.infoWithRemotes("calendar", "book"))
	e.advance(time.Second)
	other := []registry.Remote{{Type: registry.RemoteSSE, URL: "https://moved.example/sse"}}
	info := e.info("calendar", "book")
	info.Remotes = other
	info.Title = "New title"
	got, created, _ := e.register(info)
	if created || got.ServerID != srv.ServerID {
		e.t.Fatalf("re-register: created %v, id %s, want the same server", created, got.ServerID)
	}
	e.wantRemotes("re-register", got, other, "", "New title")
	e.wantRemotes("server", e.server(srv.ServerID), other, "", "New title")
	e.wantSkillRemotes(other)

	got, _, _ = e.register(e.info("calendar", "book"))
	e.wantRemotes("re-register without", got, []registry.Remote{}, "", "")
	e.wantRemotes("server", e.server(srv.ServerID), []registry.Remote{}, "", "")
	e.wantSkillRemotes([]registry.Remote{})
}

func remotesNone(e *env) {
	srv := e.registerNew(e.info("calendar", "book"))
	e.wantRemotes("register", srv, []registry.Remote{}, "", "")
	e.wantRemotes("server", e.server(srv.ServerID), []registry.Remote{}, "", "")
	hb, _ := e.heartbeat(srv.ServerID)
	e.wantRemotes("heartbeat", hb, []registry.Remote{}, "", "")
	e.wantSkillRemotes([]registry.Remote{})
	b, err := json.Marshal(srv)
	if err != nil || !bytes.Contains(b, []byte(`"remotes":[]`)) {
		e.t.Fatalf("server JSON %s: want \"remotes\":[] (%v)", b, err)
	}
}

func remotesNotInAudit(e *env) {
	info := e.infoWithRemotes("calendar", "book")
	srv := e.registerNew(info)
	e.advance(35 * time.Second)
	e.sweep()
	e.heartbeat(srv.ServerID)
	e.register(info)
	e.deregister(srv.ServerID)
	evs := e.eventsOf(srv.ServerID)
	if len(evs) < 4 {
		e.t.Fatalf("events: %d, want at least 4", len(evs))
	}
	for _, ev := range evs {
		b := mustJSON(e, ev)
		for _, needle := range []string{testRemotes[0].URL, testRemotes[1].URL, "remotes", info.Description, info.Title} {
			if bytes.Contains(b, []byte(needle)) {
				e.t.Fatalf("event %s holds %q: %s", ev.Kind, needle, b)
			}
		}
	}
}
