package memstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"slices"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// feed is the memory store's side of the change feed. Events commit the
// moment they are appended under the store's lock, in sequence order, so a
// position is the event's sequence: (epoch, 0, seq). The epoch is drawn at
// New; a position of another instance (before a restart of mcpd --dev,
// whose trail did not survive it) is expired.
type feed struct {
	epoch uint64
	key   []byte
	// log holds every tenant's events in sequence order: log[seq-1].
	log []logRef
	// changed is closed, and replaced, when an event is appended.
	changed chan struct{}
}

type logRef struct {
	t *tenant
	i int32 // index in t.events
}

func newFeed() feed {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return feed{epoch: binary.BigEndian.Uint64(b[:]) | 1, key: key, changed: make(chan struct{})}
}

// appended records the event just appended to t; the caller holds the
// write lock.
func (f *feed) appended(t *tenant) {
	f.log = append(f.log, logRef{t: t, i: int32(len(t.events) - 1)})
	close(f.changed)
	f.changed = make(chan struct{})
}

func (s *Store) position(seq int64) registry.Position {
	return registry.Position{Epoch: s.feed.epoch, Seq: seq}
}

// Horizon returns the present position.
func (s *Store) Horizon(ctx context.Context) (registry.Position, error) {
	if err := ctx.Err(); err != nil {
		return registry.Position{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.position(s.seq), nil
}

// ReadFeed returns at most limit events of every tenant after a position.
func (s *Store) ReadFeed(ctx context.Context, after registry.Position, limit int) (registry.FeedBatch, error) {
	if err := ctx.Err(); err != nil {
		return registry.FeedBatch{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := registry.FeedBatch{Horizon: s.position(s.seq)}
	start := min(max(after.Seq, 0), int64(len(s.feed.log)))
	for _, ref := range s.feed.log[start:] {
		if len(out.Events) == limit {
			break
		}
		e := &ref.t.events[ref.i]
		ev := e.public(e.srv.tenant)
		ev.Position = s.position(e.seq)
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

// CheckPosition returns p when it is a position of this instance's trail.
func (s *Store) CheckPosition(ctx context.Context, _ uuid.UUID, p registry.Position) (registry.Position, error) {
	if err := ctx.Err(); err != nil {
		return registry.Position{}, err
	}
	if p == (registry.Position{}) {
		return p, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p.Epoch != s.feed.epoch || p.TxID != 0 || p.Seq < 0 || p.Seq > s.seq {
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
	page := registry.SkillPage{Skills: []registry.SkillEntry{}, Horizon: s.position(s.seq)}
	t := s.tenants[tenantID]
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
