package pgstore

import (
	"testing"
	"time"
)

// One batch is applied at a time: a second waits for the first's turn, and
// applies beside it only after the overlap.
func TestBatchTurns(t *testing.T) {
	t.Parallel()
	b := &batcher{turn: make(chan struct{}, 1), overlap: 50 * time.Millisecond, stop: make(chan struct{})}
	if !b.takeTurn() {
		t.Fatal("the first batch did not get the turn")
	}
	t0 := time.Now()
	if b.takeTurn() {
		t.Fatal("a second batch got the turn while the first held it")
	}
	if waited := time.Since(t0); waited < b.overlap {
		t.Errorf("the second batch waited %v, want the overlap (%v)", waited, b.overlap)
	}
	// A waiting batch takes the turn the first gives back, not at the end
	// of the overlap: with an overlap of an hour, only the turn given back
	// can end its wait. (A bound of a fraction of the overlap measured on
	// the wall clock failed under load.)
	b = &batcher{turn: make(chan struct{}, 1), overlap: time.Hour, stop: make(chan struct{})}
	defer close(b.stop)
	if !b.takeTurn() {
		t.Fatal("the first batch did not get the turn")
	}
	got := make(chan bool, 1)
	go func() { got <- b.takeTurn() }()
	<-b.turn // the first batch is applied
	select {
	case ok := <-got:
		if !ok {
			t.Error("the waiting batch did not get the turn the first gave back")
		}
	case <-time.After(time.Minute):
		t.Error("the waiting batch did not take the turn the first gave back")
	}
}

func TestBatchTurnsOff(t *testing.T) {
	t.Parallel()
	b := &batcher{turn: make(chan struct{}, 1), overlap: -1, stop: make(chan struct{})}
	first := b.takeTurn()
	second := b.takeTurn()
	if first || second {
		t.Fatal("a negative overlap took turns")
	}
}
