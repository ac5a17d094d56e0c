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
