package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestCitusRegistrationWritesOnShard: the registration's audit and skills
// statements are each one task on the tenant's shard. As INSERT ... SELECT
// (from mcp_servers, from unnest) Citus ran them through the coordinator:
// a sequence's nextval in the target, or gen_random_uuid(), is a volatile
// function, and a source that is no distributed table is never pushed
// down; 4.3 ms of a registration's 9 on the test cluster (docs/scaling.md).
func TestCitusRegistrationWritesOnShard(t *testing.T) {
	db := pgtest.SharedCitus(t).NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenant, server := uuid.New(), uuid.New()
	var from *string
	skills, skillArgs := pgstore.UpsertSkills(true, tenant, server, []string{"search", "summarize"}, []string{"", "d"})
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"audit", pgstore.InsertEventSQL, []any{server, "mcp.server.registered", from, time.Now(), []string{"search"}, int64(1),
			tenant, "module", "healthy", "trace", "1.0.0", []string{"2025-06-18"}}},
		{"skills", skills, skillArgs},
	} {
		rows, err := db.Admin.Query(ctx, `EXPLAIN (COSTS false) `+c.sql, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
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
			t.Fatalf("%s: %v", c.name, err)
		}
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "INSERT ... SELECT") || strings.Contains(text, "coordinator") || !strings.Contains(text, "Task Count: 1") {
			t.Errorf("%s: not one task on the tenant's shard:\n%s", c.name, text)
		}
	}
	if q, _ := pgstore.UpsertSkills(true, tenant, server, nil, nil); q != "" {
		t.Errorf("no skills on Citus: statement %q, want none", q)
	}
}
