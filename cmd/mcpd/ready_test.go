package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// /readyz tells the truth about the monitor too: while its sweeps fail
// (here: the app role may no longer run the sweep functions) it is 503
// naming the monitor, although the store answers; once a sweep succeeds
// again it is 200.
func TestReadyzFollowsTheMonitor(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	p := startMcpd(t, db.AppURL)
	c := p.client(t, uuid.New())
	ctx := context.Background()
	testwait.Eventually(t, "ready", func() bool { return c.Readyz(ctx) == nil })
	// mcp_sweep_guarded is the sweep on PostgreSQL; mcp_sweep_guard is
	// the first call of the sweep on Citus (the sweep per tenant).
	const sweeps = `FUNCTION mcp_sweep(timestamptz, interval, interval, integer),
		mcp_sweep_guarded(timestamptz, interval, interval, integer, interval),
		mcp_sweep_guard(timestamptz, interval, interval, interval)`
	if _, err := db.Admin.Exec(ctx, `REVOKE EXECUTE ON `+sweeps+` FROM cyberos_app`); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "not ready while sweeps fail", func() bool {
		var prob *api.Problem
		return errors.As(c.Readyz(ctx), &prob) && prob.Status == http.StatusServiceUnavailable &&
			strings.Contains(prob.Detail, "monitor")
	})
	if _, err := c.Servers(ctx, client.ListServersParams{}); err != nil {
		t.Fatalf("reads still served while the monitor fails: %v", err)
	}
	if _, err := db.Admin.Exec(ctx, `GRANT EXECUTE ON `+sweeps+` TO cyberos_app`); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "ready again", func() bool { return c.Readyz(ctx) == nil })
}
