package tui

import (
	"fmt"
	"io"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/cyberos/mcpd/pkg/registry"
)

// benchBoard is a board over n servers, listed and watching, sorted by key.
func benchBoard(b *testing.B, n int, sort sortKey) Model {
	b.Helper()
	src := &fakeSource{}
	for i := range n {
		src.servers = append(src.servers, server(fmt.Sprintf("mod-%06d", i), "1.0.0", registry.StatusHealthy, time.Second))
	}
	m := NewModel(src, Options{Out: io.Discard, NoColor: true, Now: func() time.Time { return t0 }})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	next, _ = next.Update(next.(Model).list()())
	m = next.(Model)
	m.sort = sort
	m.derive()
	return m
}

// BenchmarkFeedEvent is one event in a batch of its own, applied and
// rendered, on a board of 100,000 servers.
func BenchmarkFeedEvent(b *testing.B) {
	for _, sort := range []sortKey{sortModule, sortStatus} {
		b.Run("sort="+sort.String(), func(b *testing.B) {
			m := benchBoard(b, 100_000, sort)
			evs := make([]registry.Event, 1000)
			for i := range evs {
				to := registry.StatusDegraded
				if i%2 == 1 {
					to = registry.StatusHealthy
				}
				evs[i] = event(registry.KindDegraded, fmt.Sprintf("mod-%06d", i*97), nil, to, 0)
			}
			b.ResetTimer()
			for i := range b.N {
				next, _ := m.Update(feedMsg{pipe: m.feed, events: evs[i%len(evs) : i%len(evs)+1]})
				m = next.(Model)
				_ = m.View()
			}
		})
	}
}
