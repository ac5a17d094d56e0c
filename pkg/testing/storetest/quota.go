package storetest

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// The tenant quota (ServerInfo.MaxServers): a new module past it is refused,
// an existing one always re-registers, deregistered servers do not count,
// and concurrent registrations never exceed it.
var quotaCases = []testCase{
	{"quota_refuses_new_module", quotaRefusesNewModule},
	{"quota_concurrent_registrations", quotaConcurrentRegistrations},
}

// withQuota is info with the tenant quota n.
func withQuota(info heartbeat.ServerInfo, n int) heartbeat.ServerInfo {
	info.MaxServers = n
	return info
}

func (e *env) wantQuotaExceeded(tenant uuid.UUID, info heartbeat.ServerInfo) {
	e.t.Helper()
	_, _, _, err := e.store.Register(e.ctx, tenant, info)
	if !errors.Is(err, heartbeat.ErrQuotaExceeded) {
		e.t.Fatalf("register %q at the quota: err = %v, want ErrQuotaExceeded", info.ModuleName, err)
	}
}

func quotaRefusesNewModule(e *env) {
	const quota = 3
	var servers []heartbeat.Server
	for i := range quota {
		servers = append(servers, e.registerNew(withQuota(e.info(fmt.Sprintf("mod-%d", i), "search"), quota)))
	}
	e.wantQuotaExceeded(e.tenant, withQuota(e.info("mod-new"), quota))

	// Re-registering an existing module is always allowed.
	if _, created, _ := e.register(withQuota(e.info("mod-0", "search"), quota)); created {
		e.t.Fatalf("re-registration of mod-0 at the quota: created = true")
	}
	// Another tenant has a quota of its own.
	other := uuid.New()
	if _, created, _ := e.registerFor(other, withQuota(e.info("mod-new"), quota)); !created {
		e.t.Fatalf("another tenant's first module: created = false")
	}
	// No quota: no refusal.
	e.registerNew(e.info("mod-unbounded"))
	e.wantQuotaExceeded(e.tenant, withQuota(e.info("mod-new"), quota+1))

	// Deregistered servers do not count.
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, servers[1].ServerID); err != nil {
		e.t.Fatalf("deregister: %v", err)
	}
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, servers[2].ServerID); err != nil {
		e.t.Fatalf("deregister: %v", err)
	}
	e.registerNew(withQuota(e.info("mod-new"), quota))
	e.wantQuotaExceeded(e.tenant, withQuota(e.info("mod-newer"), quota))
	// A deregistered module registering again is an existing row: allowed
	// even at the quota, and it counts again.
	srv, created, _ := e.register(withQuota(e.info("mod-1", "search"), quota))
	if created || srv.ServerID != servers[1].ServerID || srv.Status != heartbeat.StatusHealthy {
		e.t.Fatalf("re-registration of deregistered mod-1: created %v, id %s (want %s), status %s",
			created, srv.ServerID, servers[1].ServerID, srv.Status)
	}
	e.wantQuotaExceeded(e.tenant, withQuota(e.info("mod-newer"), quota+1))
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
		_, c, _, err := e.store.Register(e.ctx, e.tenant, withQuota(e.info(fmt.Sprintf("mod-%02d", i), "search"), quota))
		switch {
		case errors.Is(err, heartbeat.ErrQuotaExceeded):
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
	page, err := e.store.Servers(e.ctx, e.tenant, heartbeat.ServerFilter{Limit: heartbeat.MaxPageLimit})
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	if len(page.Servers) != quota {
		e.t.Fatalf("tenant lists %d servers, want %d", len(page.Servers), quota)
	}
}
