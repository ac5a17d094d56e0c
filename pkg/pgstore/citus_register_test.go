package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestCitusRegistrationWritesOnShard: a registration is one task on the
// worker of the tenant's shard (mcp_register, delegated). As statements
// sent one by one from the coordinator it cost 5.5 times the PostgreSQL
// CPU of plain PostgreSQL (docs/scaling.md).
func TestCitusRegistrationWritesOnShard(t *testing.T) {
	db := pgtest.SharedCitus(t).NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenant := uuid.New()
	args := []any{tenant, uuid.New(), "module", "1.0.0", []string{"2025-06-18"}, nil, "trace", []byte("[]"),
		nil, nil, []string{"search", "summarize"}, []string{"", "d"}, 0, nil}
	rows, err := db.Admin.Query(ctx, `EXPLAIN (COSTS false) `+pgstore.RegisterSQL, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.HasPrefix(text, "Custom Scan (Citus") || !strings.Contains(text, "Task Count: 1") {
		t.Errorf("registration: not one task on the tenant's worker:\n%s", text)
	}
	t.Logf("plan:\n%s", text)
}

// groupInfos are registrations that use every field a registration
// writes.
func groupInfos(version string) []registry.ServerInfo {
	return []registry.ServerInfo{
		{ModuleName: "alpha", Version: version, SupportedProtocols: []string{"2025-06-18", "2025-03-26"},
			CapabilityAdvertisement: json.RawMessage(`{"tools": {"listChanged": true}}`),
			Skills:                  []registry.SkillInfo{{Name: "search", Description: "finds"}, {Name: "summarize"}},
			Remotes:                 []registry.Remote{{Type: registry.RemoteStreamableHTTP, URL: "https://alpha.example/mcp"}},
			Description:             "Alpha's server", Title: "Alpha", TraceID: "0af7651916cd43dd8448eb211c80319c"},
		{ModuleName: "beta", Version: version, SupportedProtocols: []string{}, TraceID: "1bf7651916cd43dd8448eb211c80319c"},
		{ModuleName: "gamma", Version: version, SupportedProtocols: []string{"2025-06-18"},
			Skills:  []registry.SkillInfo{{Name: "ünïcode", Description: "\"quoted\" \\ and\nnewline"}},
			TraceID: "2cf7651916cd43dd8448eb211c80319c"},
	}
}

// withoutIdentity strips what differs between two registrations of the same
// info by two tenants: ids, times, the event's number.
func withoutIdentity(t *testing.T, st *pgstore.Store, res pgstore.RegisterResult) string {
	t.Helper()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	skills, err := st.Skills(t.Context(), res.Server.TenantID, res.Server.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range skills {
		skills[i].SkillID, skills[i].ServerID = uuid.Nil, uuid.Nil
	}
	srv, ev := res.Server, res.Event
	if ev.ServerID != srv.ServerID || ev.TenantID != srv.TenantID || ev.Body.ServerID != srv.ServerID {
		t.Errorf("event %+v of another server than %+v", ev, srv)
	}
	srv.ServerID, srv.TenantID, srv.LastHeartbeatAt, srv.RegisteredAt = uuid.Nil, uuid.Nil, time.Time{}, time.Time{}
	ev.Seq, ev.EventID, ev.TenantID, ev.ServerID, ev.Body.ServerID, ev.OccurredAt = 0, uuid.Nil, uuid.Nil, uuid.Nil, uuid.Nil, time.Time{}
	return fmt.Sprintf("created %v\nserver %+v\nevent %+v\nskills %+v", res.Created, srv, ev, skills)
}

// TestCitusRegistrationGroup: registrations of tenants of one worker that
// queued together are one call of mcp_register_group, and each is what
// it would be alone: the server, its skills, the event, created or not.
func TestCitusRegistrationGroup(t *testing.T) {
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	st, calls := tracedStore(t, db, pgstore.Options{})
	tenants := c.TenantsOnWorker(t, db, 0, 6)
	grouped, alone := tenants[:3], tenants[3:]
	// Given against the order the call takes them in.
	slices.SortFunc(grouped, func(a, b uuid.UUID) int { return bytes.Compare(b[:], a[:]) })

	for round, version := range []string{"1.0.0", "1.1.0"} { // created, then registered again
		infos := groupInfos(version)
		calls.reset()
		got := st.RegisterGroup(grouped, infos, []int{0, 0, 0})
		if n, m := calls.count("mcp_register_group("), calls.count("mcp_register("); n != 1 || m != 0 {
			t.Fatalf("round %d: %d calls of mcp_register_group and %d of mcp_register, want one group call", round, n, m)
		}
		for i, info := range infos {
			srv, _, ev, err := st.Register(t.Context(), alone[i], info, 0)
			want := withoutIdentity(t, st, pgstore.RegisterResult{Server: srv, Created: round == 0, Event: ev, Err: err})
			if g := withoutIdentity(t, st, got[i]); g != want {
				t.Errorf("round %d, %s: in a group\n%s\nalone\n%s", round, info.ModuleName, g, want)
			}
			if got[i].Server.TenantID != grouped[i] {
				t.Errorf("round %d, %s: registered for tenant %s, want %s", round, info.ModuleName, got[i].Server.TenantID, grouped[i])
			}
		}
	}
}

// TestCitusRegistrationGroupRefusesOne: when one registration of a group
// is refused for its tenant's quota, the call goes on without it: that
// one is refused, the others are registered in the same call, and
// nothing of the refused one is written, its tenant's count included.
// (Before, the call failed and each was registered again alone: a black-box
// run of 2026-12-06 saw a tenant past its quota turn another tenant's
// registrations on its worker into 503s.)
func TestCitusRegistrationGroupRefusesOne(t *testing.T) {
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	st, calls := tracedStore(t, db, pgstore.Options{})
	tenants := c.TenantsOnWorker(t, db, 1, 3)
	full := tenants[1]
	if _, _, _, err := st.Register(t.Context(), full, registry.ServerInfo{ModuleName: "first", Version: "1.0.0"}, 1); err != nil {
		t.Fatal(err)
	}
	calls.reset()
	got := st.RegisterGroup(tenants, []registry.ServerInfo{
		{ModuleName: "a", Version: "1.0.0"}, {ModuleName: "second", Version: "1.0.0"}, {ModuleName: "c", Version: "1.0.0"},
	}, []int{1, 1, 1})
	if n, m := calls.count("mcp_register_group("), calls.count("mcp_register("); n != 1 || m != 0 {
		t.Errorf("%d calls of mcp_register_group and %d of mcp_register, want one group call alone", n, m)
	}
	for i, res := range got {
		switch {
		case i == 1 && !errors.Is(res.Err, registry.ErrQuotaExceeded):
			t.Errorf("past the quota: %v, want ErrQuotaExceeded", res.Err)
		case i != 1 && (res.Err != nil || !res.Created):
			t.Errorf("registration %d beside it: created %v, %v", i, res.Created, res.Err)
		}
	}
	page, err := st.Servers(t.Context(), full, registry.ServerFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	events, err := st.Events(t.Context(), full, registry.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Servers) != 1 || len(events.Events) != 1 {
		t.Errorf("the tenant at its quota: %d servers, %d events, want the first alone", len(page.Servers), len(events.Events))
	}
	var live int
	if err := db.Admin.QueryRow(t.Context(), `SELECT live FROM mcp_tenant_servers WHERE tenant_id = $1`, full).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != 1 {
		t.Errorf("the tenant at its quota of 1 counts %d live servers after the refusal", live)
	}
}

// TestCitusConcurrentRegistrations: many registrations at once, of
// tenants of both workers, new and again, go through the groups without
// a deadlock or an error, and each tenant's trail has each registration
// once, its positions without a gap.
func TestCitusConcurrentRegistrations(t *testing.T) {
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	st, calls := tracedStore(t, db, pgstore.Options{})
	tenants := append(c.TenantsOnWorker(t, db, 0, 4), c.TenantsOnWorker(t, db, 1, 4)...)
	const callers, each, modules = 16, 12, 6
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				n := g*each + i
				tenant := tenants[n%len(tenants)]
				info := registry.ServerInfo{ModuleName: fmt.Sprintf("m%d", n%modules), Version: fmt.Sprintf("1.0.%d", n),
					Skills: []registry.SkillInfo{{Name: "search"}}}
				if _, _, _, err := st.Register(t.Context(), tenant, info, 0); err != nil {
					errs <- fmt.Errorf("registration %d: %w", n, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, tenant := range tenants {
		var positions []int64
		if err := pgx.BeginFunc(t.Context(), db.Admin, func(tx pgx.Tx) error {
			rows, err := tx.Query(t.Context(), `SELECT position FROM mcp_audit_events WHERE tenant_id = $1 ORDER BY position`, tenant)
			if err != nil {
				return err
			}
			positions, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for i, p := range positions {
			if p != int64(i+1) {
				t.Fatalf("tenant %s: positions %v, want 1 to %d", tenant, positions, len(positions))
			}
		}
		total += len(positions)
	}
	if total != callers*each {
		t.Errorf("%d registered events, want %d", total, callers*each)
	}
	groups := calls.count("mcp_register_group(")
	t.Logf("%d registrations: %d calls of mcp_register_group, %d of mcp_register",
		callers*each, groups, calls.count("mcp_register("))
	if groups == 0 {
		t.Errorf("%d callers on two workers: no registrations shared a call", callers)
	}

	// Registrations of many skills go alone, however many at once.
	calls.reset()
	many := make([]registry.SkillInfo, 17)
	for i := range many {
		many[i] = registry.SkillInfo{Name: fmt.Sprintf("skill-%d", i)}
	}
	var big sync.WaitGroup
	for g := range callers {
		big.Go(func() {
			info := registry.ServerInfo{ModuleName: fmt.Sprintf("big-%d", g), Version: "1.0.0", Skills: many}
			if _, _, _, err := st.Register(t.Context(), tenants[g%len(tenants)], info, 0); err != nil {
				t.Errorf("registration of %d skills: %v", len(many), err)
			}
		})
	}
	big.Wait()
	if n, m := calls.count("mcp_register_group("), calls.count("mcp_register("); n != 0 || m != callers {
		t.Errorf("%d registrations of %d skills at once: %d group calls, %d alone; want all alone", callers, len(many), n, m)
	}
}

// A registration's skills are written in one statement; a name given
// twice (which the API refuses) still registers, its last description
// kept, on both engines.
func TestRegisterSkills(t *testing.T) {
	for _, e := range []struct {
		name string
		db   func(t *testing.T) *pgtest.DB
	}{
		{"postgres", func(t *testing.T) *pgtest.DB { return pgtest.Shared(t).NewDB(t) }},
		{"citus", func(t *testing.T) *pgtest.DB { return pgtest.SharedCitus(t).NewDB(t) }},
	} {
		t.Run(e.name, func(t *testing.T) {
			st := pgstore.New(e.db(t).App, pgstore.Options{})
			t.Cleanup(st.Close)
			tenant := uuid.New()
			many := make([]registry.SkillInfo, 256)
			for i := range many {
				many[i] = registry.SkillInfo{Name: fmt.Sprintf("skill-%03d", i), Description: fmt.Sprintf("does %d", i)}
			}
			for _, c := range []struct {
				skills []registry.SkillInfo
				want   map[string]string
			}{
				{many, nil},
				{[]registry.SkillInfo{{Name: "a", Description: "first"}, {Name: "b"}, {Name: "a", Description: "second"}},
					map[string]string{"a": "second", "b": ""}},
				{many[:3], map[string]string{"skill-000": "does 0", "skill-001": "does 1", "skill-002": "does 2"}},
			} {
				srv, _, _, err := st.Register(t.Context(), tenant, registry.ServerInfo{ModuleName: "m", Version: "1.0.0",
					Skills: c.skills}, 0)
				if err != nil {
					t.Fatal(err)
				}
				got, err := st.Skills(t.Context(), tenant, srv.ServerID)
				if err != nil {
					t.Fatal(err)
				}
				want := c.want
				if want == nil {
					want = make(map[string]string)
					for _, s := range c.skills {
						want[s.Name] = s.Description
					}
				}
				if len(got) != len(want) {
					t.Fatalf("%d skills registered, want %d", len(got), len(want))
				}
				for _, s := range got {
					if d, ok := want[s.Name]; !ok || d != s.Description || !s.Available {
						t.Errorf("skill %+v, want description %q, available", s, d)
					}
				}
			}
		})
	}
}

// TestCitusRegistrationsOnTheTenantsWorker: once the store has a pool to a
// worker, a registration of the worker's tenants, alone or in a group, is
// one call made on that worker itself, and is what it would be through
// the coordinator: a store whose reads and calls all go through the
// coordinator reads each registration's event, exactly, one position
// further, and the servers and their skills.
func TestCitusRegistrationsOnTheTenantsWorker(t *testing.T) {
	c, db, st, viaCoordinator := storesOnAndOffTheWorkers(t)
	ctx := t.Context()
	for w := range c.Workers {
		tenants := c.TenantsOnWorker(t, db, w, 3)
		slices.SortFunc(tenants, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		info := func(module string) registry.ServerInfo {
			return registry.ServerInfo{ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
				Skills: []registry.SkillInfo{{Name: "search", Description: "finds"}, {Name: "summarize"}}}
		}
		// The store opens its pool to the worker in the background, at its
		// first call for a tenant of that worker.
		warm := 0
		testwait.Until(t, "a registration made on the worker", 30*time.Second, func() bool {
			before := st.CallsOnWorkers()
			warm++
			if _, _, _, err := st.Register(ctx, tenants[0], info(fmt.Sprintf("warm-%d", warm)), 0); err != nil {
				t.Fatal(err)
			}
			return st.CallsOnWorkers() == before+1
		})
		positions := make([]registry.Position, len(tenants))
		for i, tenant := range tenants {
			p, err := viaCoordinator.Horizon(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			positions[i] = p
		}
		calls := st.CallsOnWorkers()
		srv, created, ev, err := st.Register(ctx, tenants[1], info("alone"), 0)
		if err != nil || !created {
			t.Fatalf("worker %d: a registration alone: created %v, %v", w, created, err)
		}
		results := st.RegisterGroup(tenants, []registry.ServerInfo{info("grouped"), info("grouped"), info("grouped")}, []int{0, 0, 0})
		if n := st.CallsOnWorkers() - calls; n != 2 {
			t.Fatalf("worker %d: %d calls made on the worker for a registration alone and a group, want 2", w, n)
		}
		want := map[uuid.UUID][]pgstore.RegisterResult{tenants[1]: {{Server: srv, Created: true, Event: ev}}}
		for i, res := range results {
			if res.Err != nil || !res.Created || res.Server.TenantID != tenants[i] {
				t.Fatalf("worker %d: grouped registration %d: %+v", w, i, res)
			}
			want[tenants[i]] = append(want[tenants[i]], res)
		}
		for i, tenant := range tenants {
			batches, err := viaCoordinator.ReadFeed(ctx, []uuid.UUID{tenant}, positions[i:i+1], 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(batches) != 1 || len(batches[0].Events) != len(want[tenant]) ||
				batches[0].Horizon.Seq != positions[i].Seq+int64(len(want[tenant])) {
				t.Fatalf("worker %d, tenant %d: the trail after %v is %+v, want %d registrations", w, i, positions[i], batches, len(want[tenant]))
			}
			for j, res := range want[tenant] {
				if got := batches[0].Events[j]; got.EventID != res.Event.EventID || got.Kind != registry.KindRegistered ||
					got.ServerID != res.Server.ServerID {
					t.Errorf("worker %d, tenant %d: event %d is %+v, want %+v", w, i, j, got, res.Event)
				}
				skills, err := viaCoordinator.Skills(ctx, tenant, res.Server.ServerID)
				if err != nil || len(skills) != 2 || skills[0].Name != "search" || skills[0].Description != "finds" || !skills[1].Available {
					t.Errorf("worker %d, tenant %d: skills of %s: %+v, %v", w, i, res.Server.ModuleName, skills, err)
				}
			}
		}
	}
}
