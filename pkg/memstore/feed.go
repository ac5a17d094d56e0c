package memstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// feed is the memory store's side of the change feed. Events commit the
// moment they are appended under the store's lock, so a tenant's position
// is the length of its trail: an event's position is (epoch, 0, its index
// in the tenant's events + 1). The epoch is drawn at New; a position of
// another instance (before a restart of mcpd --dev, whose trail did not
// survive it) is expired.
type feed struct {
	epoch uint64
	key   []byte
	// changed is closed, and replaced, when an event is appended.
	changed chan struct{}
}

func newFeed() feed {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return feed{epoch: binary.BigEndian.Uint64(b[:]) | 1, key: key, changed: make(chan struct{})}
}

// appended tells the feed's waiters of an event just appended to t; the
// caller holds the write lock.
func (f *feed) appended(*tenant) {
	close(f.changed)
	f.changed = make(chan struct{})
}

// position is the position pos of a tenant's trail.
func (s *Store) position(pos int64) registry.Position {
	return registry.Position{Epoch: s.feed.epoch, Seq: pos}
}

// horizon is t's present position (t nil: a tenant without events); the
// caller holds the lock.
func (s *Store) horizon(t *tenant) registry.Position {
	if t == nil {
		return s.position(0)
	}
	return s.position(int64(len(t.events)))
}

// Horizon returns tenant's present position.
func (s *Store) Horizon(ctx context.Context, tenantID uuid.UUID) (registry.Position, error) {
	if err := ctx.Err(); err != nil {
		return registry.Position{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.horizon(s.tenants[tenantID]), nil
}

// ReadFeed returns at most limit events of each tenant after its position.
func (s *Store) ReadFeed(ctx context.Context, tenants []uuid.UUID, after []registry.Position, limit int) ([]store.FeedBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(after) != len(tenants) {
		return nil, fmt.Errorf("read feed: %d tenants, %d positions", len(tenants), len(after))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]store.FeedBatch, len(tenants))
	for k, id := range tenants {
		t := s.tenants[id]
		out[k] = store.FeedBatch{Tenant: id, Horizon: s.horizon(t)}
		if t == nil {
			continue
		}
		start := min(max(after[k].Seq, 0), int64(len(t.events)))
		for i := start; i < int64(len(t.events)) && len(out[k].Events) < limit; i++ {
			e := &t.events[i]
			ev := e.public(id)
			ev.Position = s.position(e.pos)
			out[k].Events = append(out[k].Events, ev)
		}
	}
	return out, nil
}

// CheckPosition returns p when it is a position of tenant's trail in this
// instance.
func (s *Store) CheckPosition(ctx context.Context, tenantID uuid.UUID, p registry.Position) (registry.Position, error) {
	if err := ctx.Err(); err != nil {
		return registry.Position{}, err
	}
	if p == (registry.Position{}) {
		return p, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p.Epoch != s.feed.epoch || p.TxID != 0 || p.Seq < 0 || p.Seq > s.horizon(s.tenants[tenantID]).Seq {
		return registry.Position{}, registry.ErrPositionExpired
	}
	return p, nil
}

// FeedChanged returns a channel closed when the next event is appended.
func (s *Store) FeedChanged() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.feed.changed
}

// CursorKey returns this instance's secret for sealing cursors.
func (s *Store) CursorKey(ctx context.Context) ([]byte, error) {
	return slices.Clone(s.feed.key), ctx.Err()
}

// FindSkills returns a page of tenant's skills by name, then module name.
func (s *Store) FindSkills(ctx context.Context, tenantID uuid.UUID, f registry.SkillFilter) (registry.SkillPage, error) {
	if err := ctx.Err(); err != nil {
		return registry.SkillPage{}, err
	}
	limit := pageLimit(f.Limit)
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.tenants[tenantID]
	page := registry.SkillPage{Skills: []registry.SkillEntry{}, Horizon: s.horizon(t)}
	if t == nil {
		return page, nil
	}
	type match struct {
		srv *server
		k   *skill
	}
	var found []match
	for _, srv := range t.sorted {
		if f.ModuleName != "" && srv.module != f.ModuleName ||
			f.ServerStatus != "" && srv.status != f.ServerStatus ||
			f.Protocol != "" && !slices.Contains(srv.protocols, f.Protocol) {
			continue
		}
		for i := range srv.skills {
			k := &srv.skills[i]
			if f.Name != "" && k.name != f.Name ||
				f.Available != nil && *f.Available != (k.reason == "") ||
				f.After != nil && cmp.Or(cmp.Compare(k.name, f.After.Name), cmp.Compare(srv.module, f.After.ModuleName)) <= 0 {
				continue
			}
			found = append(found, match{srv, k})
		}
	}
	slices.SortFunc(found, func(a, b match) int {
		return cmp.Or(cmp.Compare(a.k.name, b.k.name), cmp.Compare(a.srv.module, b.srv.module))
	})
	for _, m := range found {
		if len(page.Skills) == limit {
			last := page.Skills[limit-1]
			page.Next = &registry.SkillCursor{Name: last.Name, ModuleName: last.ModuleName}
			break
		}
		e := registry.SkillEntry{
			Skill: registry.Skill{SkillID: m.k.id, ServerID: m.srv.id, Name: m.k.name, Description: m.k.desc,
				Available: m.k.reason == ""},
			ModuleName: m.srv.module, ServerStatus: m.srv.status, Version: m.srv.version,
			SupportedProtocols: slices.Clone(m.srv.protocols), Remotes: cloneRemotes(m.srv.remotes),
		}
		if m.k.reason != "" {
			reason := m.k.reason
			e.UnavailableReason = &reason
		}
		if e.SupportedProtocols == nil {
			e.SupportedProtocols = []string{}
		}
		page.Skills = append(page.Skills, e)
	}
	return page, nil
}
