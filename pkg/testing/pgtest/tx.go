package pgtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AppTx returns a transaction as the app role (see DB.App) on the shared
// cluster's rollback database: see (*Cluster).Tx.
func AppTx(t testing.TB) pgx.Tx {
	t.Helper()
	return Shared(t).Tx(t, true)
}

// AdminTx returns a transaction as the superuser on the shared cluster's
// rollback database: see (*Cluster).Tx.
func AdminTx(t testing.TB) pgx.Tx {
	t.Helper()
	return Shared(t).Tx(t, false)
}

// Tx begins a transaction, as the app role when asApp is set and else as
// the superuser, on a database at the latest schema version that every Tx
// of the cluster shares, and rolls it back in t.Cleanup: the tier for a case
// that needs no commit, one connection and nothing else, cheaper than a
// database of its own (NewDB). The case sees no other case's writes, since
// none commits.
func (c *Cluster) Tx(t testing.TB, asApp bool) pgx.Tx {
	t.Helper()
	pools, err := c.rollbackPools()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	pool := pools[0]
	if asApp {
		pool = pools[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("pgtest: begin: %v", err)
	}
	t.Cleanup(func() {
		// The test's context may be over; the rollback must still run.
		if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("pgtest: rollback: %v", err)
		}
	})
	return tx
}

// rollbackPools returns the superuser's and the app role's pools on the
// rollback database, made on first use and closed by Destroy.
func (c *Cluster) rollbackPools() ([2]*pgxpool.Pool, error) {
	c.rbOnce.Do(func() { c.rbErr = c.makeRollbackDB() })
	return c.rbPools, c.rbErr
}

func (c *Cluster) makeRollbackDB() error {
	if err := c.ensureTemplate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	maint, err := c.maintPool()
	if err != nil {
		return err
	}
	name := "mcpd_test_rollback_" + randomHex(3)
	if _, err := maint.Exec(ctx, c.createDatabaseSQL(name, c.template)); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	c.rbName = name
	if c.rbPools[0], err = newPool(ctx, c.connString("", "", name)); err != nil {
		return err
	}
	c.rbPools[1], err = newPool(ctx, c.connString(c.appRole, c.appPass, name))
	return err
}

// closeRollbackDB closes the rollback database's pools and, on an external
// server, drops it. c.mu is held.
func (c *Cluster) closeRollbackDB() error {
	for i, p := range c.rbPools {
		if p != nil {
			p.Close()
			c.rbPools[i] = nil
		}
	}
	if c.rbName == "" || !c.external || c.maint == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.maint.Exec(ctx, c.dropDatabaseSQL(c.rbName)); err != nil {
		return fmt.Errorf("drop database %s: %w", c.rbName, err)
	}
	return nil
}
