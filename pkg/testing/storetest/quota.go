package storetest

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The tenant quota (the quota argument of Register): a new module past it is refused,
// an existing one always re-registers, deregistered servers do not count,
// and concurrent registrations never exceed it.
var quotaCases = []testCase{
	{"quota_refuses_new_module", quotaRefusesNewModule},
	{"quota_concurrent_registrations", quotaConcurrentRegistrations},
	{"quota_counts_deregistered_reregistration", quotaCountsDeregisteredReregistration},
	{"quota_concurrent_reregistrations", quotaConcurrentReregistrations},
}

func (e *env) wantQuotaExceeded(tenant uuid.UUID, info registry.ServerInfo, quota int) {
	e.t.Helper()
	_, _, _, err := e.store.Register(e.ctx, tenant, info, quota)
	if !errors.Is(err, registry.ErrQuotaExceeded) {
		e.t.Fatalf("register %q at the quota: err = %v, want ErrQuotaExceeded", info.ModuleName, err)
	}
}

func quotaRefusesNewModule(e *env) {
	const quota = 3
	var servers []registry.Server
	for i := range quota {
		servers = append(servers, e.registerNewQuota(e.info(fmt.Sprintf("mod-%d", i), "search"), quota))
	}
	e.wantQuotaExceeded(e.tenant, e.info("mod-new"), quota)

	// Re-registering an existing module is always allowed.
	if _, created, _ := e.registerQuota(e.tenant, e.info("mod-0", "search"), quota); created {
		e.t.Fatalf("re-registration of mod-0 at the quota: created = true")
	}
	// Another tenant has a quota of its own.
	other := uuid.New()
	if _, created, _ := e.registerQuota(other, e.info("mod-new"), quota); !created {
		e.t.Fatalf("another tenant's first module: created = false")
	}
	// No quota: no refusal.
	e.registerNew(e.info("mod-unbounded"))
	e.wantQuotaExceeded(e.tenant, e.info("mod-new"), quota+1)

	// Deregistered servers do not count.
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, servers[1].ServerID); err != nil {
		e.t.Fatalf("deregister: %v", err)
	}
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, servers[2].ServerID); err != nil {
		e.t.Fatalf("deregister: %v", err)
	}
	e.registerNewQuota(e.info("mod-new"), quota)
	e.wantQuotaExceeded(e.tenant, e.info("mod-newer"), quota)
	// A deregistered module registering again counts as a new server: the
	// same row and id, but refused at the quota.
	e.wantQuotaExceeded(e.tenant, e.info("mod-1", "search"), quota)
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, servers[0].ServerID); err != nil {
		e.t.Fatalf("deregister: %v", err)
	}
	srv, created, _ := e.registerQuota(e.tenant, e.info("mod-1", "search"), quota)
	if created || srv.ServerID != servers[1].ServerID || srv.Status != registry.StatusHealthy {
		e.t.Fatalf("re-registration of deregistered mod-1 below the quota: created %v, id %s (want %s), status %s",
			created, srv.ServerID, servers[1].ServerID, srv.Status)
	}
	e.wantQuotaExceeded(e.tenant, e.info("mod-newer"), quota)
}

// The cycle that grew a tenant without bound: deregister every module,
// register as many new ones, re-register the old ones. The old ones are
// refused: the tenant never has more live servers than its quota.
func quotaCountsDeregisteredReregistration(e *env) {
	const quota = 5
	var old []registry.Server
	for i := range quota {
		old = append(old, e.registerNewQuota(e.info(fmt.Sprintf("old-%d", i)), quota))
	}
	for _, s := range old {
		e.deregister(s.ServerID)
	}
	for i := range quota {
		e.registerNewQuota(e.info(fmt.Sprintf("new-%d", i)), quota)
	}
	for i := range quota {
		e.wantQuotaExceeded(e.tenant, e.info(fmt.Sprintf("old-%d", i)), quota)
	}
	if n := e.liveServers(); n != quota {
		e.t.Fatalf("tenant has %d live servers, want the quota %d", n, quota)
	}
	for i := range quota {
		if got := e.server(old[i].ServerID).Status; got != registry.StatusDeregistered {
			e.t.Fatalf("refused re-registration of old-%d changed its status to %s", i, got)
		}
	}
	// Without a quota it comes back, the same server.
	if srv, created, _ := e.register(e.info("old-0")); created || srv.ServerID != old[0].ServerID {
		e.t.Fatalf("re-registration without a quota: created %v, id %s, want %s", created, srv.ServerID, old[0].ServerID)
	}
}

// liveServers counts the tenant's servers that are not deregistered.
func (e *env) liveServers() int {
	e.t.Helper()
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: registry.MaxPageLimit})
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	n := 0
	for _, s := range page.Servers {
		if s.Status != registry.StatusDeregistered {
			n++
		}
	}
	return n
}

// 10 deregistered modules and 10 new ones register at once at a quota of
// 5 (every one of them a new server for the quota): exactly 5 succeed.
func quotaConcurrentReregistrations(e *env) {
	const (
		quota = 5
		n     = 20
	)
	for i := range n / 2 {
		srv := e.registerNew(e.info(fmt.Sprintf("mod-%02d", i), "search"))
		e.deregister(srv.ServerID)
	}
	var ok, refused atomic.Int32
	errs := make([]error, n)
	run(n, func(i int) {
		_, _, _, err := e.store.Register(e.ctx, e.tenant, e.info(fmt.Sprintf("mod-%02d", i), "search"), quota)
		switch {
		case errors.Is(err, registry.ErrQuotaExceeded):
			refused.Add(1)
		case err != nil:
			errs[i] = err
		default:
			ok.Add(1)
		}
	})
	if err := errors.Join(errs...); err != nil {
		e.t.Fatalf("concurrent registrations: %v", err)
	}
	if ok.Load() != quota || refused.Load() != n-quota {
		e.t.Fatalf("concurrent (re-)registrations at quota %d: %d registered, %d refused; want %d and %d",
			quota, ok.Load(), refused.Load(), quota, n-quota)
	}
	if live := e.liveServers(); live != quota {
		e.t.Fatalf("tenant has %d live servers, want %d", live, quota)
	}
}

// 20 registrations of distinct modules at once at a quota of 5: exactly 5
// are created, the others refused, and the tenant lists 5.
func quotaConcurrentRegistrations(e *env) {
	const (
		quota = 5
		n     = 20
	)
	var created, refused atomic.Int32
	errs := make([]error, n)
	run(n, func(i int) {
		_, c, _, err := e.store.Register(e.ctx, e.tenant, e.info(fmt.Sprintf("mod-%02d", i), "search"), quota)
		switch {
		case errors.Is(err, registry.ErrQuotaExceeded):
			refused.Add(1)
		case err != nil:
			errs[i] = err
		case c:
			created.Add(1)
		}
	})
	if err := errors.Join(errs...); err != nil {
		e.t.Fatalf("concurrent registrations: %v", err)
	}
	if created.Load() != quota || refused.Load() != n-quota {
		e.t.Fatalf("concurrent registrations at quota %d: %d created, %d refused; want %d and %d",
			quota, created.Load(), refused.Load(), quota, n-quota)
	}
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: registry.MaxPageLimit})
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	if len(page.Servers) != quota {
		e.t.Fatalf("tenant lists %d servers, want %d", len(page.Servers), quota)
	}
}
