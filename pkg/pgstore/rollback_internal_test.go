package pgstore

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// A tenant's transaction whose work failed is rolled back within a bound
// when the server stops answering meanwhile (SIGSTOP: a host that hangs,
// a network that drops packets): the call returns its error instead of
// waiting for a ROLLBACK that is never answered.
func TestInTenantRollbackBoundedWhenTheServerHangs(t *testing.T) {
	c := pgtest.NewCluster(t)
	db := c.NewDB(t)
	s := New(db.App, Options{})
	t.Cleanup(s.Close)
	failed := errors.New("the work failed")
	inWork, frozen := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.inTenant(t.Context(), uuid.New(), func(pgx.Tx) error {
			close(inWork)
			<-frozen
			return failed
		})
	}()
	<-inWork
	c.Freeze(t)
	close(frozen)
	select {
	case err := <-done:
		if !errors.Is(err, failed) {
			t.Fatalf("inTenant: %v, want the work's error", err)
		}
	case <-time.After(10 * time.Second):
		c.Thaw(t)
		<-done
		t.Fatal("inTenant waited for the ROLLBACK of a server that hangs")
	}
}
