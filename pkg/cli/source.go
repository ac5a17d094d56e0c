package cli

import (
	"context"
	"sync"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// Bounds of the watch source's reads of the audit trail.
const (
	// sourceMaxPages bounds the pages one Events call follows; a long trail
	// is caught up over several refreshes.
	sourceMaxPages = 50
	// sourceTailSlack is how many new events a re-read of the last page
	// makes room for.
	sourceTailSlack = 100
)

// Source adapts the API client to tui.Source: every server of the tenant,
// and the latest audit events, read incrementally so that a refresh asks
// only for what is new.
//
// The trail is ordered oldest first and paged by opaque cursors, and the
// last page has none to continue from; so the source remembers the cursor
// that starts the last page it read and how many events of that page it has
// already taken, and the next read starts there and skips those.
type Source struct {
	c  *client.Client
	mu sync.Mutex

	pageCursor string            // starts the last page read; "" the trail's start
	taken      int               // events of that page already in latest
	keep       int               // how many events latest holds at most
	latest     []heartbeat.Event // the newest events, oldest first
}

// NewSource returns a watch source reading through c.
func NewSource(c *client.Client) *Source { return &Source{c: c} }

// Servers returns every server of the tenant.
func (s *Source) Servers(ctx context.Context) ([]heartbeat.Server, error) {
	return s.c.AllServers(ctx, client.ListServersParams{})
}

// Events returns the latest limit audit events, oldest first.
func (s *Source) Events(ctx context.Context, limit int) ([]heartbeat.Event, error) {
	if limit <= 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > s.keep {
		// Older events than those kept are needed: read the trail again.
		s.pageCursor, s.taken, s.keep, s.latest = "", 0, limit, nil
	}
	for page := 0; page < sourceMaxPages; page++ {
		params := client.ListEventsParams{
			Cursor: s.pageCursor,
			Limit:  min(max(s.taken+sourceTailSlack, limit), heartbeat.MaxPageLimit),
		}
		list, err := s.c.Events(ctx, params)
		if err != nil {
			return nil, err
		}
		if s.taken < len(list.Events) {
			s.add(list.Events[s.taken:])
		}
		s.taken = max(s.taken, len(list.Events))
		if list.NextCursor == nil || *list.NextCursor == "" {
			break
		}
		s.pageCursor, s.taken = *list.NextCursor, 0
	}
	out := make([]heartbeat.Event, len(s.latest))
	copy(out, s.latest)
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

func (s *Source) add(events []heartbeat.Event) {
	s.latest = append(s.latest, events...)
	if over := len(s.latest) - s.keep; over > 0 {
		s.latest = append(s.latest[:0:0], s.latest[over:]...)
	}
}
