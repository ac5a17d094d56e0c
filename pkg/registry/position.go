package registry

import (
	"cmp"
	"errors"
)

// Position is a place in the audit trail in the order in which events
// committed, the same for every tenant, every replica and across restarts.
// An event's position is (TxID, Seq) of the transaction and row that wrote
// it; a horizon position (Seq 0) stands after every event of a transaction
// older than TxID. A store hands out a position only once every event
// before it has committed, so that a reader that continues after a
// position never skips an event that commits later.
//
// Epoch names the history the position belongs to (PostgreSQL's timeline,
// the memory store's instance): after a failover a position of another
// epoch is honoured only when the store can prove it still exists.
type Position struct {
	Epoch uint64
	TxID  uint64
	Seq   int64
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
// history was lost, for example in a database failover); the client lists
// again and watches from the list's horizon.
var ErrPositionExpired = errors.New("position can no longer be resumed from")

// FeedBatch is a read of every tenant's trail after a position: the events,
// in commit order, and the horizon, past every event the read returned.
// When the read was not cut by its limit, no event before Horizon is left
// to read.
type FeedBatch struct {
	Events  []Event
	Horizon Position
}
