package board_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cyberos/mcpd/pkg/client"
)

// TestBrowserAsksForATokenOnceExpired: the board's watch ends and, by the
// time it would reconnect, its token has expired (mcpd ends a watch at its
// token's exp; here the page's clock jumps past it, as a laptop that slept
// does): the board asks for a token, saying why, and does not retry with
// the expired one. With a valid token it reconnects
// (TestBrowserReconnectAfterRestart).
func TestBrowserAsksForATokenOnceExpired(t *testing.T) {
	b := newBrowser(t)
	ten, secretFile := newTenant(t)
	d, stop := startDaemon(t, devConfig(secretFile), nil)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	register(t, c, "alpha", "query")

	b.run(chromedp.Navigate(base + "/ui/"))
	b.signIn(ten.read) // an hour's token
	b.until("listed", statusOf("alpha")+` === 'healthy'`)
	b.until("live", `document.getElementById('conn').dataset.state === 'live'`)
	// Two hours pass for the page, not for its timers.
	eval[int](b, `(() => { const now = Date.now; Date.now = () => now() + 2 * 3600 * 1000; return 1; })()`)
	watches := func() int {
		n := 0
		for _, r := range b.requests() {
			if strings.Contains(r, "/v1/mcp/watch") {
				n++
			}
		}
		return n
	}
	before := watches()
	stop()
	b.until("asked for a token", `!document.getElementById('signin-view').hidden && `+
		`/expired/.test(document.getElementById('signin-error').textContent) && sessionStorage.length === 0`)
	if n := watches(); n != before {
		t.Fatalf("%d watch requests after the stream ended with an expired token, want none", n-before)
	}
}
