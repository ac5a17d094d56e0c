package migrations_test

import (
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestEventKindsMatchTable: the schema knows exactly the kinds of
// registry.Kinds, and its alert outbox takes exactly the events the table
// puts in it, so that a kind added to one and not the other fails here.
func TestEventKindsMatchTable(t *testing.T) {
	t.Parallel()
	tx := pgtest.AdminTx(t)

	// The CHECK of mcp_audit_events.kind takes every kind of the table and
	// nothing else.
	var check string
	if err := tx.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'mcp_audit_events'::regclass AND conname = 'mcp_audit_events_kind_check'`).Scan(&check); err != nil {
		t.Fatalf("kind check: %v", err)
	}
	holds := func(pred string, args ...any) bool {
		t.Helper()
		var ok *bool
		q := `SELECT ` + pred + ` FROM (VALUES ($1::text, $2::text)) AS v(kind, from_status)`
		if err := tx.QueryRow(ctx, q, args...).Scan(&ok); err != nil {
			t.Fatalf("%s with %v: %v", pred, args, err)
		}
		return ok != nil && *ok
	}
	checkExpr := strings.TrimPrefix(check, "CHECK ")
	for _, k := range registry.EventKinds {
		if !holds(checkExpr, string(k), nil) {
			t.Errorf("the schema refuses kind %s of registry.Kinds: %s", k, check)
		}
	}
	if holds(checkExpr, "mcp.server.unknown", nil) {
		t.Errorf("the schema takes a kind not in registry.Kinds: %s", check)
	}

	// The alert outbox (its index, which its functions follow) takes an
	// event exactly when registry.IsAlertEvent does.
	var pred string
	if err := tx.QueryRow(ctx, `SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
		WHERE i.indexrelid = 'mcp_audit_events_tenant_alert_idx'::regclass`).Scan(&pred); err != nil {
		t.Fatalf("alert index: %v", err)
	}
	froms := append([]registry.Status{registry.NoStatus}, registry.Statuses...)
	for _, k := range registry.EventKinds {
		for _, from := range froms {
			var fromArg, fromPtr = any(nil), (*registry.Status)(nil)
			if from != registry.NoStatus {
				fromArg, fromPtr = string(from), &from
			}
			if got, want := holds(pred, string(k), fromArg), registry.IsAlertEvent(k, fromPtr); got != want {
				t.Errorf("kind %s from %q: in the schema's alert outbox %t, in registry.Kinds' %t (%s)",
					k, from, got, want, pred)
			}
		}
	}
}
