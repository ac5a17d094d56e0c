package pgstore

import (
	"bytes"
	"testing"

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
	for _, m := range modules(g.take(worker)) {
		if !want[m] {
			t.Errorf("first call took %s, want a1 and b1", m)
		}
		delete(want, m)
	}
	if len(want) > 0 {
		t.Errorf("first call left out %v", want)
	}
	want = map[string]bool{"a2": true, "b2": true}
	for _, m := range modules(g.take(worker)) {
		if !want[m] {
			t.Errorf("second call took %s, want a2 and b2", m)
		}
		delete(want, m)
	}
	if len(want) > 0 {
		t.Errorf("second call left out %v", want)
	}
	if got := g.take(worker); got != nil || g.busy[worker] != 0 || len(g.queued[worker]) != 0 {
		t.Errorf("nothing left: took %v, busy %d, queued %d; want nil, 0, 0", got, g.busy[worker], len(g.queued[worker]))
	}
	if got := len(g.take(other)); got != maxRegisterGroup {
		t.Errorf("a call of %d tenants took %d, want %d", len(many), got, maxRegisterGroup)
	}
	if got := len(g.take(other)); got != 3 {
		t.Errorf("the next call took %d, want the 3 left", got)
	}
}
