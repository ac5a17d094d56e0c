package board_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
)

// rowOrder is the expression of the module names of the servers table, in
// its order, joined by commas.
const rowOrder = `[...document.querySelectorAll('#servers-table tbody tr')].map((tr) => tr.querySelector('th').textContent).join(',')`

// TestBrowserBoardOrdersByStatus: the servers table lists those that need
// a look first (unhealthy, degraded, healthy, deregistered), then by name,
// as the TUI's status order does, and follows the feed into that order; a
// click on the Module heading orders by name, one on Status back. It was
// ordered by name only, so an unhealthy server could be pages away.
func TestBrowserBoardOrdersByStatus(t *testing.T) {
	b := newBrowser(t)
	ten, secretFile := newTenant(t)
	clock := clockwork.NewFakeClockAt(time.Now())
	d, _ := startDaemon(t, devConfig(secretFile), clock)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	ctx := context.Background()

	srv := map[string]registry.Server{}
	for _, m := range []string{"alpha", "bravo", "charlie", "delta", "echo"} {
		srv[m] = register(t, c, m, "s-"+m)
	}
	heartbeat := func(modules ...string) {
		t.Helper()
		for _, m := range modules {
			if _, err := c.Heartbeat(ctx, srv[m].ServerID); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.run(chromedp.Navigate(base + "/ui/"))
	b.signIn(ten.read)
	b.until("all listed, by name while all are healthy", rowOrder+` === 'alpha,bravo,charlie,delta,echo'`)
	b.until("live", `document.getElementById('conn').dataset.state === 'live'`)
	b.until("the Status heading marked", `document.getElementById('sort-status').closest('th').getAttribute('aria-sort') === 'ascending'`)

	// delta deregistered; bravo and echo silent for three intervals
	// (unhealthy); charlie for two (degraded); alpha heartbeats.
	if _, err := c.Deregister(ctx, srv["delta"].ServerID); err != nil {
		t.Fatal(err)
	}
	b.until("delta last", rowOrder+` === 'alpha,bravo,charlie,echo,delta'`)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	iv := registry.DefaultHeartbeatInterval
	clock.Advance(2 * iv)
	statusIs(t, c, srv["alpha"].ServerID, registry.StatusDegraded)
	heartbeat("alpha", "charlie")
	clock.Advance(iv)
	statusIs(t, c, srv["echo"].ServerID, registry.StatusUnhealthy)
	heartbeat("alpha")
	clock.Advance(iv)
	statusIs(t, c, srv["charlie"].ServerID, registry.StatusDegraded)
	statusIs(t, c, srv["bravo"].ServerID, registry.StatusUnhealthy)
	statusIs(t, c, srv["alpha"].ServerID, registry.StatusHealthy)
	b.until("by status, then name, without a reload", rowOrder+` === 'bravo,echo,charlie,alpha,delta'`)

	// Name order one click away, and back.
	b.run(chromedp.Click(chromedp.CSS(`#sort-name`)))
	b.until("by name", rowOrder+` === 'alpha,bravo,charlie,delta,echo' && location.hash.includes('sort=name')`+
		` && document.getElementById('sort-name').closest('th').getAttribute('aria-sort') === 'ascending'`+
		` && !document.getElementById('sort-status').closest('th').hasAttribute('aria-sort')`)
	// The module filter keeps the order chosen.
	b.run(chromedp.SendKeys(chromedp.CSS(`#module-filter`), "a"))
	b.until("filtered, by name", rowOrder+` === 'alpha,bravo,charlie,delta'`)
	b.run(chromedp.Click(chromedp.CSS(`#sort-status`)))
	b.until("filtered, by status", rowOrder+` === 'bravo,charlie,alpha,delta' && !location.hash.includes('sort=')`)
	b.run(chromedp.Click(chromedp.CSS(`#clear-filters`)))
	b.until("by status again", rowOrder+` === 'bravo,echo,charlie,alpha,delta'`)

	// A recovery moves the server at once.
	heartbeat("bravo")
	b.until("bravo recovered, among the healthy", rowOrder+` === 'echo,charlie,alpha,bravo,delta'`)
}
