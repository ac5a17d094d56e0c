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

// TestCitusRegistrationAuditOnShard: the registration's audit statement is
// one statement routed to the tenant's shard. As an INSERT ... SELECT from
// mcp_servers it went through the coordinator (a sequence's nextval in the
// target is a volatile function, which Citus does not push down), 3.6 ms
// of a registration's 9 on the test cluster (docs/scaling.md).
func TestCitusRegistrationAuditOnShard(t *testing.T) {
	db := pgtest.SharedCitus(t).NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var from *string
	rows, err := db.Admin.Query(ctx, `EXPLAIN (COSTS false) `+pgstore.InsertEventSQL,
		uuid.New(), "mcp.server.registered", from, time.Now(), []string{"search"}, int64(1), uuid.New(),
		"module", "healthy", "trace", "1.0.0", []string{"2025-06-18"})
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
	if strings.Contains(text, "INSERT ... SELECT") || strings.Contains(text, "coordinator") || !strings.Contains(text, "Task Count: 1") {
		t.Fatalf("the audit insert is not one task on the tenant's shard:\n%s", text)
	}
}
