package migrations_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// The skill alerts' firing set is reached by the app role only through
// its three functions, which are definers with a fixed search_path, not
// executable by PUBLIC; they see availability across tenants but return
// only what the caller asks of.
func TestSkillAlertsOnlyThroughFunctions(t *testing.T) {
	t.Parallel()
	// The app role's session, rolled back at the end (the shared rollback
	// database has no committed alert, so the firing sets are this case's).
	// The catalog reads are the same whoever makes them.
	tx := pgtest.AppTx(t)
	for _, fn := range []string{"mcp_skill_alert_states(text, uuid[], text[])", "mcp_skill_alerts_firing(text)",
		"mcp_skill_alerts_record(text, uuid[], text[], timestamptz[], uuid[], text[])"} {
		var public, app, definer bool
		var config []string
		if err := tx.QueryRow(ctx, `SELECT has_function_privilege('public', $1, 'EXECUTE'),
			has_function_privilege('cyberos_app', $1, 'EXECUTE'), prosecdef, coalesce(proconfig, '{}')
			FROM pg_proc WHERE oid = $1::regprocedure`, fn).Scan(&public, &app, &definer, &config); err != nil {
			t.Fatal(err)
		}
		if public || !app || !definer || !slices.Contains(config, "search_path=public, pg_temp") {
			t.Fatalf("%s: EXECUTE for PUBLIC %v, for cyberos_app %v, definer %v, config %v", fn, public, app, definer, config)
		}
	}
	tenant := uuid.New()
	seedTx(t, tx, tenant, "calendar") // offers calendar-skill, available
	for _, stmt := range []string{`SELECT count(*) FROM mcp_skill_alerts`,
		`INSERT INTO mcp_skill_alerts VALUES ('d', gen_random_uuid(), 's', now())`} {
		wantState(t, stmt, inSavepoint(t, tx, stmt), insufficientPrivilege)
	}
	setTenant(t, tx, uuid.Nil) // the functions are called with no tenant set

	if _, err := tx.Exec(ctx, `SELECT mcp_skill_alerts_record('d', $1, $2, ARRAY[now()], '{}', '{}')`,
		[]uuid.UUID{tenant}, []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT skill, available, firing_since IS NOT NULL FROM mcp_skill_alert_states('d', $1, $2)`,
		[]uuid.UUID{tenant, tenant}, []string{"calendar-skill", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		Skill     string
		Available bool
		Firing    bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[state])
	if err != nil {
		t.Fatal(err)
	}
	if want := []state{{"calendar-skill", true, false}, {"gone", false, true}}; !slices.Equal(got, want) {
		t.Fatalf("states %+v, want %+v", got, want)
	}
	if n := count(t, tx, `SELECT count(*) FROM mcp_skill_alerts_firing('other')`); n != 0 {
		t.Fatalf("another destination fires %d alerts", n)
	}
	if _, err := tx.Exec(ctx, `SELECT mcp_skill_alerts_record('d', '{}', '{}', '{}', $1, $2)`,
		[]uuid.UUID{tenant}, []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, tx, `SELECT count(*) FROM mcp_skill_alerts_firing('d')`); n != 0 {
		t.Fatalf("%d alerts fire after the resolution", n)
	}
}
