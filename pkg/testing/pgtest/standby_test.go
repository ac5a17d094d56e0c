package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A synchronous standby has every acknowledged commit of its primary, is
// read-only until promoted, and takes writes after.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewCluster(t)
	db := primary.NewDB(t)
	standby := primary.StartStandby(t, true)
	ctx := context.Background()
	if _, err := db.Admin.Exec(ctx, `CREATE TABLE acked (n int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `INSERT INTO acked SELECT generate_series(1, 100)`); err != nil {
		t.Fatal(err)
	}
	onStandby, err := pgxpool.New(ctx, standby.DBURL(db.Name, false))
	if err != nil {
		t.Fatal(err)
	}
	defer onStandby.Close()
	var readOnly bool
	if err := onStandby.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&readOnly); err != nil || !readOnly {
		t.Fatalf("standby in recovery: %v, %v", readOnly, err)
	}

	db.Admin.Close() // before its server goes
	primary.Crash(t)
	standby.Promote(t)
	var n int
	if err := onStandby.QueryRow(ctx, `SELECT count(*) FROM acked`).Scan(&n); err != nil || n != 100 {
		t.Fatalf("after promotion: %d acknowledged rows, %v; want 100", n, err)
	}
	testwait.Poll(t, "a write on the promoted standby", 10*time.Second, func() error {
		_, err := onStandby.Exec(ctx, `INSERT INTO acked VALUES (101)`)
		return err
	})
}
