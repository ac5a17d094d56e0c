package pgstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A worker's next call takes the first registration of each tenant still
// waiting, at most maxRegisterGroup, in tenant order; the rest wait for
// the call after; a caller gone is dropped; with nothing left the call's
// slot is given back.
func TestRegisterGroupsTake(t *testing.T) {
	t.Parallel()
	a, b := uuid.New(), uuid.New()
	req := func(tenant uuid.UUID, module string) *registerRequest {
		return &registerRequest{reg: registration{tenant: tenant, module: module}}
	}
	gone := req(a, "gone")
	gone.gone.Store(true)
	a1, b1, a2, b2 := req(a, "a1"), req(b, "b1"), req(a, "a2"), req(b, "b2")
	many := make([]*registerRequest, maxRegisterGroup+3)
	for i := range many {
		many[i] = req(uuid.New(), "m")
	}
	const worker, other = 7, 8
	g := &registerGroups{
		queued: map[int64][]*registerRequest{worker: {gone, a1, b1, a2, b2}, other: many},
		busy:   map[int64]int{worker: 1, other: 1},
	}
	modules := func(group []*registerRequest) (out []string) {
		for i, r := range group {
			if i > 0 && bytes.Compare(group[i-1].reg.tenant[:], r.reg.tenant[:]) >= 0 {
				t.Errorf("group not in tenant order: %v", group)
			}
			out = append(out, r.reg.module)
		}
		return out
	}
	want := map[string]bool{"a1": true, "b1": true}
	for _, m := range modules(g.take(worker, time.Time{})) {
		if !want[m] {
			t.Errorf("first call took %s, want a1 and b1", m)
		}
		delete(want, m)
	}
	if len(want) > 0 {
		t.Errorf("first call left out %v", want)
	}
	want = map[string]bool{"a2": true, "b2": true}
	for _, m := range modules(g.take(worker, time.Time{})) {
		if !want[m] {
			t.Errorf("second call took %s, want a2 and b2", m)
		}
		delete(want, m)
	}
	if len(want) > 0 {
		t.Errorf("second call left out %v", want)
	}
	if got := g.take(worker, time.Time{}); got != nil || g.busy[worker] != 0 || len(g.queued[worker]) != 0 {
		t.Errorf("nothing left: took %v, busy %d, queued %d; want nil, 0, 0", got, g.busy[worker], len(g.queued[worker]))
	}
	if got := len(g.take(other, time.Time{})); got != maxRegisterGroup {
		t.Errorf("a call of %d tenants took %d, want %d", len(many), got, maxRegisterGroup)
	}
	if got := len(g.take(other, time.Time{})); got != 3 {
		t.Errorf("the next call took %d, want the 3 left", got)
	}
}

// A registration starts a call of its worker when none is in flight; with
// one in flight it waits for it, unless the worker's calls made no
// progress (none started or ended) for registerHedgeAfter, and never
// past registerCallsPerWorker calls.
func TestRegisterGroupsHedge(t *testing.T) {
	t.Parallel()
	const worker = 3
	var g registerGroups
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	req := func() *registerRequest { return &registerRequest{reg: registration{tenant: uuid.New()}} }
	for i, st := range []struct {
		at        time.Duration
		take      bool // a call of the worker takes the queue instead
		start     bool
		busyAfter int
	}{
		{at: 0, start: true, busyAfter: 1},                                       // none in flight
		{at: 5 * time.Millisecond, start: false, busyAfter: 1},                   // the call is young
		{at: 5*time.Millisecond + registerHedgeAfter, start: true, busyAfter: 2}, // held up: a second
		{at: time.Second, start: false, busyAfter: 2},                            // two at most
		{at: time.Second, take: true, busyAfter: 2},                              // a call ends, takes the queue
		{at: time.Second + registerHedgeAfter - time.Millisecond, start: false, busyAfter: 2},
		{at: 2 * time.Second, take: true, busyAfter: 2},                    // takes the one queued
		{at: 2 * time.Second, take: true, busyAfter: 1},                    // nothing queued: gives its slot back
		{at: 2*time.Second + time.Millisecond, start: false, busyAfter: 1}, // the other just made progress
		{at: 3 * time.Second, start: true, busyAfter: 2},
	} {
		now := t0.Add(st.at)
		if st.take {
			g.take(worker, now)
		} else if got := g.enqueue(worker, req(), now); got != st.start {
			t.Errorf("step %d at %v: start %v, want %v", i, st.at, got, st.start)
		}
		if g.busy[worker] != st.busyAfter {
			t.Errorf("step %d at %v: %d calls in flight, want %d", i, st.at, g.busy[worker], st.busyAfter)
		}
	}
}
