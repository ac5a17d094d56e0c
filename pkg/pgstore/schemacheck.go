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
// version this build expects, is dirty, or has another build's functions.
var ErrSchemaMismatch = errors.New("schema version mismatch")

// CheckSchema reports nil when the database's schema is exactly
// migrations.Latest, not dirty, with this build's functions, and an error
// wrapping ErrSchemaMismatch
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
	var digest string
	err = q.QueryRow(ctx, `SELECT digest FROM mcp_schema_functions`).Scan(&digest)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: the functions were never applied: run mcpctl migrate up", ErrSchemaMismatch)
	case err != nil:
		return fmt.Errorf("read the functions' digest: %w", err)
	case digest != migrations.FunctionsDigest():
		return fmt.Errorf("%w: the database has another build's functions: run this build's mcpctl migrate up", ErrSchemaMismatch)
	}
	return nil
}
