package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/tui"
)

// Source adapts the API client to tui.Source: a full list of the servers
// with the watch cursor of its first page, one server, and the change feed.
type Source struct {
	c *client.Client
}

// NewSource returns a watch source reading through c.
func NewSource(c *client.Client) *Source { return &Source{c: c} }

// List returns every server of the tenant, following every page, and the
// first page's watch_cursor: watching from it misses nothing that any page
// did not reflect.
func (s *Source) List(ctx context.Context) (tui.Snapshot, error) {
	var snap tui.Snapshot
	params := client.ListServersParams{Limit: registry.MaxPageLimit}
	for page := 0; page < maxListPages; page++ {
		list, err := s.c.Servers(ctx, params)
		if err != nil {
			return tui.Snapshot{}, err
		}
		if page == 0 {
			snap.Cursor = list.WatchCursor
		}
		snap.Servers = append(snap.Servers, list.Servers...)
		if list.NextCursor == nil || *list.NextCursor == "" {
			break
		}
		params.Cursor = *list.NextCursor
	}
	snap.Availability = s.availability(ctx, snap.Servers)
	return snap, nil
}

// availability is each server's available ratio of the last 24 hours; nil
// when mcpd cannot say (one without the endpoint): the board then shows no
// column rather than no servers.
func (s *Source) availability(ctx context.Context, servers []registry.Server) map[uuid.UUID]*float64 {
	ids := make([]uuid.UUID, len(servers))
	for i, srv := range servers {
		ids[i] = srv.ServerID
	}
	ratios, err := s.c.AvailabilityRatios(ctx, ids, registry.Window24h)
	if err != nil {
		return nil
	}
	out := make(map[uuid.UUID]*float64, len(ratios))
	for id, r := range ratios {
		out[id] = r.AvailableRatio
	}
	return out
}

// Server returns one server.
func (s *Source) Server(ctx context.Context, id uuid.UUID) (registry.Server, error) {
	return s.c.Server(ctx, id)
}

// Watch follows the change feed after cursor, passing on every audit event
// (not the bookmarks) and the stream's state; a 410 is tui.ErrCursorExpired.
func (s *Source) Watch(ctx context.Context, cursor string, fn func(registry.Event) error, state func(error)) error {
	err := s.c.Watch(ctx, client.WatchParams{Cursor: cursor, OnState: state}, func(msg client.WatchEvent) error {
		if msg.Bookmark {
			return nil
		}
		return fn(msg.Event)
	})
	var p *apiwire.Problem
	if errors.As(err, &p) && p.Status == http.StatusGone {
		return fmt.Errorf("%w: %s", tui.ErrCursorExpired, p.Error())
	}
	return err
}
