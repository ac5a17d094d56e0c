package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/migrations"
)

// ErrSchemaMismatch reports a database whose schema is not exactly the
// version this build expects, or is dirty.
var ErrSchemaMismatch = errors.New("schema version mismatch")

// CheckSchema reports nil when the database's schema is exactly
// migrations.Latest and not dirty, and an error wrapping ErrSchemaMismatch
// when it is not. Any other error means the database did not answer. q is
// typically a *pgxpool.Pool of mcpd's own login role, or a transaction.
func CheckSchema(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	var (
		version int64
		dirty   bool
	)
	err := q.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: no migration applied, want version %d", ErrSchemaMismatch, migrations.Latest)
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable:
		return fmt.Errorf("%w: no schema_migrations table, want version %d", ErrSchemaMismatch, migrations.Latest)
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case dirty:
		return fmt.Errorf("%w: version %d is dirty, want version %d", ErrSchemaMismatch, version, migrations.Latest)
	case version < 0 || uint64(version) != uint64(migrations.Latest):
		return fmt.Errorf("%w: database at version %d, want version %d", ErrSchemaMismatch, version, migrations.Latest)
	}
	return nil
}
