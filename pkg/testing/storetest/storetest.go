package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Start is the time every case's fake clock must show when it begins.
var Start = time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)

// Interval is the heartbeat interval I the suite sweeps with.
const Interval = 10 * time.Second

// Store is what the suite tests: a store.Store with the live counts of
// the mass-loss check, the status counts of the metrics and the reads of
// the MCP registry API.
type Store interface {
	store.Store
	store.LiveCounter
	store.StatusCounter
	store.CatalogReader
	store.HeldHeartbeatWriter
}

// Harness is one isolated store under test. Sweep spans every tenant, so no
// two cases may share a store (for PostgreSQL: a database per harness).
type Harness struct {
	Store Store
	Clock *clockwork.FakeClock // the store's clock, at Start; the suite advances it
	// DisableSkill makes a skill unavailable for a reason of its own (not the
	// cascade), as the upstream skill registry would.
	DisableSkill func(ctx context.Context, tenant, serverID uuid.UUID, name, reason string) error
}

type testCase struct {
	name string
	run  func(e *env)
}

// Run runs every case of the suite, each as a parallel subtest with its
// own newHarness(t).
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, c := range allCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(setup(t, newHarness))
		})
	}
}

// allCases is every case of the suite.
func allCases() []testCase {
	var all []testCase
	all = append(all, lifecycleCases...)
	all = append(all, registrationCases...)
	all = append(all, listingCases...)
	all = append(all, concurrencyCases...)
	all = append(all, blindCases...)
	all = append(all, feedCases...)
	all = append(all, quotaCases...)
	all = append(all, pageBytesCases...)
	all = append(all, remotesCases...)
	all = append(all, catalogCases...)
	all = append(all, availabilityCases...)
	all = append(all, heldCases...)
	return all
}

// env is what a case needs: the harness, a context and a fresh tenant.
type env struct {
	t      *testing.T
	ctx    context.Context
	h      Harness
	store  Store
	tenant uuid.UUID
}

func setup(t *testing.T, newHarness func(t *testing.T) Harness) *env {
	t.Helper()
	h := newHarness(t)
	if h.Store == nil || h.Clock == nil || h.DisableSkill == nil {
		t.Fatalf("harness incomplete: Store, Clock and DisableSkill are required")
	}
	if now := h.Clock.Now(); !now.Equal(Start) {
		t.Fatalf("harness clock at %s, want storetest.Start (%s)", now.Format(time.RFC3339Nano), Start.Format(time.RFC3339Nano))
	}
	return &env{t: t, ctx: t.Context(), h: h, store: h.Store, tenant: uuid.New()}
}

// info is a valid registration of module with the named skills.
func (e *env) info(module string, skills ...string) registry.ServerInfo {
	info := registry.ServerInfo{
		ModuleName:              module,
		Version:                 "1.0.0",
		SupportedProtocols:      []string{"2025-06-18"},
		CapabilityAdvertisement: json.RawMessage(`{"tools":{"listChanged":true}}`),
		TraceID:                 registry.NewTraceID(),
	}
	for _, s := range skills {
		info.Skills = append(info.Skills, registry.SkillInfo{Name: s, Description: "does " + s})
	}
	return info
}

func (e *env) now() time.Time { return e.h.Clock.Now() }

func (e *env) advance(d time.Duration) { e.h.Clock.Advance(d) }

func (e *env) register(info registry.ServerInfo) (registry.Server, bool, registry.Event) {
	return e.registerFor(e.tenant, info)
}

func (e *env) registerFor(tenant uuid.UUID, info registry.ServerInfo) (registry.Server, bool, registry.Event) {
	e.t.Helper()
	return e.registerQuota(tenant, info, 0)
}

// registerQuota registers info for tenant under the tenant quota quota
// (0: none).
func (e *env) registerQuota(tenant uuid.UUID, info registry.ServerInfo, quota int) (registry.Server, bool, registry.Event) {
	e.t.Helper()
	srv, created, ev, err := e.store.Register(e.ctx, tenant, info, quota)
	if err != nil {
		e.t.Fatalf("register %q: %v", info.ModuleName, err)
	}
	return srv, created, ev
}

// registerNew registers a new server and checks the answer and its event.
func (e *env) registerNew(info registry.ServerInfo) registry.Server {
	e.t.Helper()
	return e.registerNewQuota(info, 0)
}

// registerNewQuota is registerNew under the tenant quota quota (0: none).
func (e *env) registerNewQuota(info registry.ServerInfo, quota int) registry.Server {
	e.t.Helper()
	srv, created, ev := e.registerQuota(e.tenant, info, quota)
	if !created {
		e.t.Fatalf("register %q: created = false for a new server", info.ModuleName)
	}
	e.checkServer(srv, srvWant{status: registry.StatusHealthy, heartbeat: e.now(), registered: e.now()})
	e.checkEvent(ev, evWant{kind: registry.KindRegistered, srv: srv, to: registry.StatusHealthy, at: e.now(), affected: skillNames(info)})
	return srv
}

func (e *env) heartbeat(id uuid.UUID) (registry.Server, *registry.Event) {
	e.t.Helper()
	srv, ev, err := e.store.Heartbeat(e.ctx, e.tenant, id)
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", id, err)
	}
	return srv, ev
}

func (e *env) deregister(id uuid.UUID) (registry.Server, *registry.Event) {
	e.t.Helper()
	srv, ev, err := e.store.Deregister(e.ctx, e.tenant, id)
	if err != nil {
		e.t.Fatalf("deregister %s: %v", id, err)
	}
	return srv, ev
}

func (e *env) disable(id uuid.UUID, name, reason string) {
	e.t.Helper()
	if err := e.h.DisableSkill(e.ctx, e.tenant, id, name, reason); err != nil {
		e.t.Fatalf("disable skill %q: %v", name, err)
	}
}

// sweep sweeps at the clock's now, as the design's monitor does.
func (e *env) sweep() []registry.Event {
	e.t.Helper()
	return e.sweepAt(e.now(), 1000)
}

func (e *env) sweepAt(now time.Time, limit int) []registry.Event {
	e.t.Helper()
	result, err := e.store.Sweep(e.ctx, store.SweepRequest{Now: now, Interval: Interval, Limit: limit})
	evs := result.Events
	if err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
	return evs
}

// sweepNone sweeps and fails if anything moved.
func (e *env) sweepNone() {
	e.t.Helper()
	if evs := e.sweep(); len(evs) != 0 {
		e.t.Fatalf("sweep at +%s: %d transitions, want none: %s", e.now().Sub(Start), len(evs), describe(evs))
	}
}

// sweepOne sweeps and wants exactly one transition.
func (e *env) sweepOne() registry.Event {
	e.t.Helper()
	evs := e.sweep()
	if len(evs) != 1 {
		e.t.Fatalf("sweep at +%s: %d transitions, want 1: %s", e.now().Sub(Start), len(evs), describe(evs))
	}
	return evs[0]
}

func (e *env) server(id uuid.UUID) registry.Server {
	e.t.Helper()
	return e.serverOf(e.tenant, id)
}

func (e *env) serverOf(tenant, id uuid.UUID) registry.Server {
	e.t.Helper()
	srv, err := e.store.Server(e.ctx, tenant, id)
	if err != nil {
		e.t.Fatalf("server %s: %v", id, err)
	}
	return srv
}

func (e *env) wantStatus(id uuid.UUID, want registry.Status) {
	e.t.Helper()
	if got := e.server(id).Status; got != want {
		e.t.Fatalf("server %s: status %s, want %s", id, got, want)
	}
}

func (e *env) skills(id uuid.UUID) []registry.Skill {
	e.t.Helper()
	skills, err := e.store.Skills(e.ctx, e.tenant, id)
	if err != nil {
		e.t.Fatalf("skills %s: %v", id, err)
	}
	if skills == nil {
		e.t.Fatalf("skills %s: nil, want a list", id)
	}
	return skills
}

// wantSkills checks the exact set of skills of id: name to unavailable
// reason, "" for available.
func (e *env) wantSkills(id uuid.UUID, want map[string]string) {
	e.t.Helper()
	skills := e.skills(id)
	got := make(map[string]string, len(skills))
	for i, k := range skills {
		if i > 0 && skills[i-1].Name >= k.Name {
			e.t.Fatalf("skills of %s not ordered by name: %q before %q", id, skills[i-1].Name, k.Name)
		}
		if k.ServerID != id {
			e.t.Fatalf("skill %q: server_id %s, want %s", k.Name, k.ServerID, id)
		}
		if k.SkillID == uuid.Nil {
			e.t.Fatalf("skill %q: nil skill_id", k.Name)
		}
		switch {
		case k.Available && k.UnavailableReason != nil:
			e.t.Fatalf("skill %q: available with reason %q", k.Name, *k.UnavailableReason)
		case !k.Available && (k.UnavailableReason == nil || *k.UnavailableReason == ""):
			e.t.Fatalf("skill %q: unavailable without a reason", k.Name)
		case k.Available:
			got[k.Name] = ""
		default:
			got[k.Name] = *k.UnavailableReason
		}
	}
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("skills of %s (name: reason, \"\" available):\n got  %v\n want %v", id, got, want)
	}
}

// allEvents pages through every event of f with f.Limit per page (100 if
// unset), checking the order and the cursors.
func (e *env) allEvents(tenant uuid.UUID, f registry.EventFilter) []registry.Event {
	e.t.Helper()
	var out []registry.Event
	for range 10_000 {
		page, err := e.store.Events(e.ctx, tenant, f)
		if err != nil {
			e.t.Fatalf("events %+v: %v", f, err)
		}
		if page.Events == nil {
			e.t.Fatalf("events %+v: nil, want a list", f)
		}
		if f.Limit > 0 && len(page.Events) > f.Limit {
			e.t.Fatalf("events: %d on a page of limit %d", len(page.Events), f.Limit)
		}
		out = append(out, page.Events...)
		if page.Next == nil {
			for i := 1; i < len(out); i++ {
				if out[i].Position.Compare(out[i-1].Position) <= 0 {
					e.t.Fatalf("events not in commit order: %+v after %+v", out[i].Position, out[i-1].Position)
				}
				if out[i].OccurredAt.Before(out[i-1].OccurredAt) {
					e.t.Fatalf("events not oldest first: %s after %s", out[i].OccurredAt, out[i-1].OccurredAt)
				}
			}
			return out
		}
		if len(page.Events) == 0 {
			e.t.Fatalf("events: an empty page with a next cursor")
		}
		if last := page.Events[len(page.Events)-1].Position; *page.Next != last || page.Horizon != last {
			e.t.Fatalf("events: next %+v, horizon %+v, want the last event's %+v", *page.Next, page.Horizon, last)
		}
		f.After = *page.Next
	}
	e.t.Fatalf("events: no last page after 10000 pages")
	return nil
}

func (e *env) eventsOf(id uuid.UUID) []registry.Event {
	e.t.Helper()
	return e.allEvents(e.tenant, registry.EventFilter{ServerID: &id})
}

// wantKinds checks the kinds of id's events, oldest first.
func (e *env) wantKinds(id uuid.UUID, want ...registry.EventKind) {
	e.t.Helper()
	evs := e.eventsOf(id)
	got := make([]registry.EventKind, len(evs))
	for i, ev := range evs {
		got[i] = ev.Kind
	}
	if !slices.Equal(got, want) {
		e.t.Fatalf("events of %s:\n got  %v\n want %v", id, got, want)
	}
}

// wantLogged checks that ev, as a call returned it, is in the audit trail.
func (e *env) wantLogged(ev registry.Event) {
	e.t.Helper()
	for _, got := range e.eventsOf(ev.ServerID) {
		if got.EventID == ev.EventID {
			if err := sameEvent(got, ev); err != nil {
				e.t.Fatalf("event %s in the trail differs from the one returned: %v", ev.EventID, err)
			}
			return
		}
	}
	e.t.Fatalf("event %s (%s) returned but not in the audit trail", ev.EventID, ev.Kind)
}

type srvWant struct {
	status       registry.Status
	heartbeat    time.Time
	registered   time.Time
	deregistered time.Time // zero: nil
}

func (e *env) checkServer(srv registry.Server, w srvWant) {
	e.t.Helper()
	if srv.ServerID == uuid.Nil {
		e.t.Fatalf("server %q: nil server_id", srv.ModuleName)
	}
	if srv.TenantID != e.tenant {
		e.t.Fatalf("server %q: tenant_id %s, want %s", srv.ModuleName, srv.TenantID, e.tenant)
	}
	if srv.Status != w.status {
		e.t.Fatalf("server %q: status %s, want %s", srv.ModuleName, srv.Status, w.status)
	}
	e.sameTime("last_heartbeat_at", srv.LastHeartbeatAt, w.heartbeat)
	e.sameTime("registered_at", srv.RegisteredAt, w.registered)
	switch {
	case w.deregistered.IsZero() && srv.DeregisteredAt != nil:
		e.t.Fatalf("server %q: deregistered_at %s, want nil", srv.ModuleName, srv.DeregisteredAt)
	case !w.deregistered.IsZero() && srv.DeregisteredAt == nil:
		e.t.Fatalf("server %q: deregistered_at nil, want %s", srv.ModuleName, w.deregistered)
	case !w.deregistered.IsZero():
		e.sameTime("deregistered_at", *srv.DeregisteredAt, w.deregistered)
	}
	if !registry.ValidTraceID(srv.TraceID) {
		e.t.Fatalf("server %q: trace_id %q is not 32 lowercase hex digits", srv.ModuleName, srv.TraceID)
	}
	if srv.SupportedProtocols == nil {
		e.t.Fatalf("server %q: supported_protocols nil, want a list (the store is where lists stop being nil)", srv.ModuleName)
	}
}

func (e *env) sameTime(what string, got, want time.Time) {
	e.t.Helper()
	if err := checkTime(got, want); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// checkTime compares at PostgreSQL's precision, a microsecond, and wants UTC.
func checkTime(got, want time.Time) error {
	if !got.Truncate(time.Microsecond).Equal(want.Truncate(time.Microsecond)) {
		return fmt.Errorf("%s, want %s", got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
	if got.Location() != time.UTC {
		return fmt.Errorf("%s is in %s, want UTC", got.Format(time.RFC3339Nano), got.Location())
	}
	return nil
}

type evWant struct {
	kind     registry.EventKind
	srv      registry.Server // id, module, trace id, version and protocols
	from     registry.Status // "": none
	to       registry.Status
	at       time.Time
	affected []string
}

func (e *env) checkEvent(ev registry.Event, w evWant) {
	e.t.Helper()
	if err := checkEvent(ev, e.tenant, w); err != nil {
		e.t.Fatalf("event %s of %q: %v", w.kind, w.srv.ModuleName, err)
	}
}

func checkEvent(ev registry.Event, tenant uuid.UUID, w evWant) error {
	from := ""
	if ev.FromStatus != nil {
		from = string(*ev.FromStatus)
		if from == "" {
			return errors.New("from_status points to an empty status, want nil")
		}
	}
	switch {
	case ev.EventID == uuid.Nil:
		return errors.New("nil event_id")
	case ev.Kind != w.kind:
		return fmt.Errorf("kind %s, want %s", ev.Kind, w.kind)
	case ev.Body.SkillsAffected == nil || ev.Body.SupportedProtocols == nil:
		return errors.New("body skills_affected or supported_protocols nil, want a list")
	case !ev.Kind.Spec().Allows(registry.Status(from), ev.ToStatus):
		return fmt.Errorf("kind %s from %q to %s: a transition registry.Kinds does not allow", ev.Kind, from, ev.ToStatus)
	case ev.TenantID != tenant:
		return fmt.Errorf("tenant %s, want %s", ev.TenantID, tenant)
	case ev.ServerID != w.srv.ServerID || ev.Body.ServerID != w.srv.ServerID:
		return fmt.Errorf("server_id %s, body %s, want %s", ev.ServerID, ev.Body.ServerID, w.srv.ServerID)
	case ev.ModuleName != w.srv.ModuleName || ev.Body.ModuleName != w.srv.ModuleName:
		return fmt.Errorf("module_name %q, body %q, want %q", ev.ModuleName, ev.Body.ModuleName, w.srv.ModuleName)
	case from != string(w.from):
		return fmt.Errorf("from_status %q, want %q", from, w.from)
	case ev.ToStatus != w.to || ev.Body.Status != w.to:
		return fmt.Errorf("to_status %s, body status %s, want %s", ev.ToStatus, ev.Body.Status, w.to)
	case ev.TraceID != w.srv.TraceID:
		return fmt.Errorf("trace_id %q, want the server's %q", ev.TraceID, w.srv.TraceID)
	case ev.Body.Version != w.srv.Version:
		return fmt.Errorf("body version %q, want %q", ev.Body.Version, w.srv.Version)
	}
	if err := checkTime(ev.OccurredAt, w.at); err != nil {
		return fmt.Errorf("occurred_at: %w", err)
	}
	if err := sameList("body supported_protocols", ev.Body.SupportedProtocols, w.srv.SupportedProtocols); err != nil {
		return err
	}
	want := w.affected
	if want == nil {
		want = []string{}
	}
	return sameList("body skills_affected", ev.Body.SkillsAffected, want)
}

// sameList compares as the API would print them: a nil list is not [].
func sameList(what string, got, want []string) error {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		return fmt.Errorf("%s %s, want %s", what, g, w)
	}
	return nil
}

func sameEvent(a, b registry.Event) error {
	if !a.OccurredAt.Truncate(time.Microsecond).Equal(b.OccurredAt.Truncate(time.Microsecond)) {
		return fmt.Errorf("occurred_at %s and %s", a.OccurredAt, b.OccurredAt)
	}
	a.Seq, b.Seq = 0, 0
	a.Position, b.Position = registry.Position{}, registry.Position{}
	a.OccurredAt, b.OccurredAt = time.Time{}, time.Time{}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) || a.TenantID != b.TenantID {
		return fmt.Errorf("\n %s\n %s", ja, jb)
	}
	return nil
}

func skillNames(info registry.ServerInfo) []string {
	names := make([]string, len(info.Skills))
	for i, s := range info.Skills {
		names[i] = s.Name
	}
	sort.Strings(names)
	return names
}

// reasons maps every skill name to reason.
func reasons(reason string, names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = reason
	}
	return m
}

// merge returns the union of maps, later ones winning.
func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func describe(evs []registry.Event) string {
	var b bytes.Buffer
	for _, ev := range evs {
		from := "-"
		if ev.FromStatus != nil {
			from = string(*ev.FromStatus)
		}
		fmt.Fprintf(&b, "[%s %s %s->%s] ", ev.ModuleName, ev.Kind, from, ev.ToStatus)
	}
	return b.String()
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// jsonAbsent reports whether raw says nothing: empty or JSON null.
func jsonAbsent(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
