package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

func TestCheckSchemaMismatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The app role reads the version, in a transaction or not.
	if err := pgstore.CheckSchema(ctx, pgtest.AppTx(t)); err != nil {
		t.Fatalf("CheckSchema as the app role on a migrated database = %v", err)
	}
	for _, tt := range []struct {
		name, sql string
	}{
		{"dirty", `UPDATE schema_migrations SET dirty = true`},
		{"older", fmt.Sprintf(`UPDATE schema_migrations SET version = %d`, migrations.Latest-1)},
		{"newer", fmt.Sprintf(`UPDATE schema_migrations SET version = %d`, migrations.Latest+1)},
		{"none", `DELETE FROM schema_migrations`},
		{"another build's functions", `UPDATE mcp_schema_functions SET digest = 'another'`},
		{"functions never applied", `DELETE FROM mcp_schema_functions`},
		// Not DROP TABLE: its lock would wait for every open transaction
		// on the shared database that has read the table.
		{"no table", `SET LOCAL search_path = pg_catalog`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx := pgtest.AdminTx(t)
			if _, err := tx.Exec(ctx, tt.sql); err != nil {
				t.Fatal(err)
			}
			if err := pgstore.CheckSchema(ctx, tx); !errors.Is(err, pgstore.ErrSchemaMismatch) {
				t.Fatalf("CheckSchema = %v, want ErrSchemaMismatch", err)
			}
		})
	}
	// A database that does not answer is not a mismatch.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := pgstore.CheckSchema(cctx, pgtest.AppTx(t)); err == nil || errors.Is(err, pgstore.ErrSchemaMismatch) {
		t.Fatalf("CheckSchema with a cancelled context = %v, want an error that is not ErrSchemaMismatch", err)
	}
}
