package registry

import (
	"cmp"
	"errors"
)

// Position is a place in one tenant's audit trail. Every event of a tenant
// has a position of its own, Seq: 1, 2, 3, … in the order in which the
// tenant's events committed, without gaps (the store takes it from a
// per-tenant counter in the event's own transaction, which orders the
// tenant's writers). A position also stands for the trail up to it, so that
// a reader that continues after a position never skips an event that
// commits later. Positions of two tenants are not comparable.
//
// Epoch names the history the position belongs to (PostgreSQL's timeline,
// the memory store's instance): a position of another epoch is expired,
// since after a failover the same number may name another event.
type Position struct {
	Epoch uint64
	// TxID is zero in every position this build hands out. It carried the
	// transaction id of the positions of earlier builds (format 1), which a
	// store answers with ErrPositionExpired.
	TxID uint64
	Seq  int64
}

// Compare orders positions by (TxID, Seq); the epoch is not compared.
func (p Position) Compare(q Position) int {
	if c := cmp.Compare(p.TxID, q.TxID); c != 0 {
		return c
	}
	return cmp.Compare(p.Seq, q.Seq)
}

// Max returns the later of p and q.
func (p Position) Max(q Position) Position {
	if q.Compare(p) > 0 {
		return q
	}
	return p
}

// ErrPositionExpired means the store can no longer resume from a position (its
// history was lost, for example in a database failover, or the position is
// of an older format); the client lists again and watches from the list's
// horizon.
var ErrPositionExpired = errors.New("position can no longer be resumed from")
