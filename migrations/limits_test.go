package migrations_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// The app role sees and locks only its own tenant's count (mcpd keeps it:
// pkg/pgstore's TestTenantLiveCountKept).
func TestTenantLiveCountIsolated(t *testing.T) {
	t.Parallel()
	tx := pgtest.AppTx(t)
	a, b := uuid.New(), uuid.New()
	for _, tenant := range []uuid.UUID{a, b} {
		setTenant(t, tx, tenant)
		if _, err := tx.Exec(ctx, `INSERT INTO mcp_tenant_servers (tenant_id, live) VALUES ($1, 1)`, tenant); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, tenant uuid.UUID, want int) {
		t.Helper()
		setTenant(t, tx, tenant)
		if kept := count(t, tx, `SELECT COALESCE((SELECT live FROM mcp_tenant_servers WHERE tenant_id = $1), 0)`, tenant); kept != want {
			t.Fatalf("%s: kept %d, want %d", what, kept, want)
		}
	}
	// The app role sees and locks only its own tenant's count.
	setTenant(t, tx, uuid.Nil)
	if n := count(t, tx, `SELECT count(*) FROM mcp_tenant_servers`); n != 0 {
		t.Fatalf("without a tenant the app sees %d counts", n)
	}
	setTenant(t, tx, a)
	if _, err := tx.Exec(ctx, `UPDATE mcp_tenant_servers SET live = 0 WHERE tenant_id = $1`, b); err != nil {
		t.Fatalf("update of another tenant's count: %v", err)
	}
	check("another tenant's count cannot be touched", b, 1)
}

// capability_bytes is the size of the advertisement's JSON text, a
// generated column (0018): kept on insert and on every update of the
// advertisement, never set by the app.
func TestCapabilityBytesKept(t *testing.T) {
	t.Parallel()
	// Written and read back as the tenant, in one rolled-back transaction.
	tx := pgtest.AppTx(t)
	a := uuid.New()
	id := seedTx(t, tx, a, "one")
	want := count(t, tx, `SELECT octet_length(capability_advertisement::text) FROM mcp_servers WHERE server_id = $1`, id)
	if got := count(t, tx, `SELECT capability_bytes FROM mcp_servers WHERE server_id = $1`, id); got != want || got == 0 {
		t.Fatalf("capability_bytes %d, want %d", got, want)
	}
	// Already in jsonb's own text form: the size is the text's.
	for _, caps := range []string{`{"x": "0123456789", "tools": {"listChanged": true}}`, ""} {
		want := len(caps)
		var v any
		if caps != "" {
			v = caps
		}
		if err := inSavepoint(t, tx, `UPDATE mcp_servers SET capability_advertisement = $2::jsonb, capability_bytes = 7 WHERE server_id = $1`, id, v); err == nil {
			t.Fatal("the app set capability_bytes itself")
		}
		if _, err := tx.Exec(ctx, `UPDATE mcp_servers SET capability_advertisement = $2::jsonb WHERE server_id = $1`, id, v); err != nil {
			t.Fatal(err)
		}
		got := count(t, tx, `SELECT capability_bytes FROM mcp_servers WHERE server_id = $1`, id)
		text := count(t, tx, `SELECT COALESCE(octet_length(capability_advertisement::text), 0) FROM mcp_servers WHERE server_id = $1`, id)
		if got != text || got != want {
			t.Fatalf("advertisement %q: capability_bytes %d, text %d, want %d", caps, got, text, want)
		}
	}
}
