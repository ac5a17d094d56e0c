// Package pguuid makes pgx encode github.com/google/uuid values as it
// encodes a [16]byte, instead of through their driver.Valuer: for a uuid
// parameter the driver formats the value as a string, fails a binary
// encode of it (building an error), parses the string back to bytes and
// encodes those, for every tenant and server id of every statement. It
// is what github.com/jackc/pgx-google-uuid does for encoding, in the few
// lines mcpd needs.
package pguuid

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Register makes m encode uuid.UUID values (alone, in slices and arrays)
// as [16]byte wherever the driver can encode a [16]byte: a uuid parameter.
// Elsewhere (a text parameter) they go through their driver.Valuer as
// before. Call it for every connection, as AfterConnect does.
func Register(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapEncodePlan}, m.TryWrapEncodePlanFuncs...)
}

// AfterConnect registers the encoding on conn, then runs next when it is
// not nil: a pgxpool.Config's AfterConnect.
func AfterConnect(next func(context.Context, *pgx.Conn) error) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error {
		Register(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

func tryWrapEncodePlan(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &encodePlan{}, [16]byte(u), true
	}
	return nil, nil, false
}

// encodePlan encodes a uuid.UUID with the plan of a [16]byte.
type encodePlan struct{ next pgtype.EncodePlan }

func (p *encodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *encodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode([16]byte(value.(uuid.UUID)), buf)
}
