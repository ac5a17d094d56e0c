package pguuid_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/pguuid"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// A uuid.UUID parameter of type uuid is encoded as a [16]byte, in binary;
// one of type text keeps its driver.Valuer's text.
func TestPlans(t *testing.T) {
	m := pgtype.NewMap()
	pguuid.Register(m)
	id := uuid.New()
	plan := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id)
	if name := fmt.Sprintf("%T", plan); name != "*pguuid.encodePlan" {
		t.Fatalf("the plan of a uuid.UUID as a binary uuid is %s, want pguuid's", name)
	}
	got, err := plan.Encode(id, nil)
	if err != nil || string(got) != string(id[:]) {
		t.Fatalf("encoded %x, %v; want the 16 bytes %x", got, err, id[:])
	}
	text := m.PlanEncode(pgtype.TextOID, pgtype.TextFormatCode, id)
	if text == nil {
		t.Fatal("no plan for a uuid.UUID as text")
	}
	if got, err := text.Encode(id, nil); err != nil || string(got) != id.String() {
		t.Fatalf("encoded as text %q, %v; want %q", got, err, id.String())
	}
	// Without Register, the driver's plan is the driver.Valuer's.
	if name := fmt.Sprintf("%T", pgtype.NewMap().PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id)); name == "*pguuid.encodePlan" {
		t.Fatal("the driver's own plan is pguuid's")
	}
}

// Through a real connection of a pool that registers it (pgtest's, as
// pgstore.Connect's): uuids, arrays of them and the nil uuid reach the
// server as the same values, and come back the same.
func TestRoundTrip(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	ctx := t.Context()
	ids := []uuid.UUID{uuid.New(), uuid.Nil, uuid.New()}
	var text string
	var back []uuid.UUID
	if err := db.Admin.QueryRow(ctx, `SELECT $1::uuid::text, $2::uuid[]`, ids[0], ids).Scan(&text, &back); err != nil {
		t.Fatal(err)
	}
	if text != ids[0].String() || len(back) != 3 || back[0] != ids[0] || back[1] != uuid.Nil || back[2] != ids[2] {
		t.Fatalf("the server read %s and %v; want %s and %v", text, back, ids[0], ids)
	}
	var same bool
	if err := db.Admin.QueryRow(ctx, `SELECT $1::text = $2`, ids[2], ids[2].String()).Scan(&same); err != nil || !same {
		t.Fatalf("a uuid.UUID as a text parameter: %t, %v; want its string", same, err)
	}
}

// The pools that mcpd (pgstore.Connect) and the tests (pgtest) open
// register pguuid on their connections.
func TestPoolsRegisterIt(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	ctx := t.Context()
	pool, err := pgstore.Connect(ctx, db.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for name, p := range map[string]interface {
		Acquire(context.Context) (*pgxpool.Conn, error)
	}{"pgstore.Connect": pool, "pgtest": db.App} {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plan := c.Conn().TypeMap().PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, uuid.New())
		c.Release()
		if got := fmt.Sprintf("%T", plan); got != "*pguuid.encodePlan" {
			t.Errorf("%s: a connection's plan for a uuid.UUID is %s, want pguuid's", name, got)
		}
	}
}
