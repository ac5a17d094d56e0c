package board_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestBrowserBoard drives the board in chromium against an in-process mcpd
// --dev on a fake clock: sign-in (and its refusals), both statuses, a server
// going degraded, unhealthy and recovered without a reload, the filters,
// the server and skills pages, and where the token never goes.
func TestBrowserBoard(t *testing.T) {
	b := newBrowser(t)
	ten, secretFile := newTenant(t)
	clock := clockwork.NewFakeClockAt(time.Now())
	d, _ := startDaemon(t, devConfig(secretFile), clock)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	ctx := context.Background()

	calendar := register(t, c, "calendar", "search", "schedule")
	mail := register(t, c, "mail", "send", "search")

	b.run(chromedp.Navigate(base + "/ui/"))
	// The sign-in: a password input labelled Token in a form.
	b.until("sign-in form", `(() => { const i = document.getElementById('token');`+
		` const l = document.querySelector('label[for=token]');`+
		` return !!i && i.type === 'password' && !!i.form && !!l && l.textContent.trim() === 'Token' && i.offsetParent !== null; })()`)

	// A token mcpd refuses (401), one without the read scope (403) and an
	// expired one: a clear message, and back to the sign-in.
	b.signIn(ten.token(t, auth403Scope, time.Now()) + "x")
	b.until("401 message", `document.getElementById('signin-error').textContent.includes('401')`)
	b.signIn(ten.token(t, auth403Scope, time.Now()))
	b.until("403 message", `document.getElementById('signin-error').textContent.includes('403')`)
	b.signIn(ten.token(t, "mcp:read", time.Now().Add(-2*time.Hour)))
	b.until("expired message", `/expired/.test(document.getElementById('signin-error').textContent)`+
		` && !document.getElementById('signin-view').hidden`)

	b.signIn(ten.read)
	b.until("both servers listed", statusOf("calendar")+` === 'healthy' && `+statusOf("mail")+` === 'healthy'`)
	b.until("live", `document.getElementById('conn').dataset.state === 'live'`)
	b.until("skill counts", `document.querySelector('#servers-table tbody tr').cells[5].textContent === '2/2'`)
	b.until("remotes", `document.querySelector('#servers-table tbody tr').cells[6].textContent.includes('`+remoteOf("calendar")+`')`)
	// A mark that a reload would lose.
	eval[int](b, `window.noReload = 1`)

	// Two intervals of silence: both degraded; calendar heartbeats back.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * registry.DefaultHeartbeatInterval)
	statusIs(t, c, mail.ServerID, registry.StatusDegraded)
	b.until("mail degraded", statusOf("mail")+` === 'degraded'`)
	if _, err := c.Heartbeat(ctx, calendar.ServerID); err != nil {
		t.Fatal(err)
	}
	b.until("both statuses", statusOf("calendar")+` === 'healthy' && `+statusOf("mail")+` === 'degraded'`)
	b.until("counts", `document.querySelector('#counts [data-status=degraded]').textContent.includes('1')`)

	// A third interval: mail unhealthy, its skills unavailable.
	clock.Advance(registry.DefaultHeartbeatInterval)
	statusIs(t, c, mail.ServerID, registry.StatusUnhealthy)
	b.until("mail unhealthy", statusOf("mail")+` === 'unhealthy'`)
	b.until("mail's skills unavailable", `[...document.querySelectorAll('#servers-table tbody tr')]`+
		`.find((tr) => tr.dataset.status === 'unhealthy').cells[5].textContent === '0/2'`)

	// The filters: by status, then by module, kept in the fragment.
	b.run(chromedp.Click(chromedp.CSS(`#counts [data-status=unhealthy]`)))
	b.until("status filter", `document.querySelectorAll('#servers-table tbody tr').length === 1 && `+statusOf("mail")+` === 'unhealthy'`+
		` && location.hash.includes('status=unhealthy')`)
	b.run(chromedp.Click(chromedp.CSS(`#counts [data-status=unhealthy]`)))
	b.run(chromedp.SendKeys(chromedp.CSS(`#module-filter`), "cal"))
	b.until("module filter", `document.querySelectorAll('#servers-table tbody tr').length === 1 && `+statusOf("calendar")+` === 'healthy'`+
		` && location.hash.includes('module=cal')`)
	b.run(chromedp.Click(chromedp.CSS(`#clear-filters`)))
	b.until("filters cleared", `document.querySelectorAll('#servers-table tbody tr').length === 2`)
	// By keyboard: Tab from the module field reaches the next control, and
	// Enter on a focused count button filters.
	eval[int](b, `document.getElementById('module-filter').focus(), 0`)
	b.run(chromedp.KeyEvent(kb.Tab))
	if !eval[bool](b, `document.activeElement.id === 'clear-filters'`) {
		t.Fatalf("Tab from the module field went to %s", eval[string](b, `document.activeElement.outerHTML`))
	}
	eval[int](b, `document.querySelector('#counts [data-status=healthy]').focus(), 0`)
	b.run(chromedp.KeyEvent(kb.Enter))
	b.until("keyboard filter", `document.querySelectorAll('#servers-table tbody tr').length === 1 && `+statusOf("calendar")+` === 'healthy'`+
		` && document.querySelector('#counts [data-status=healthy]').getAttribute('aria-pressed') === 'true'`)
	b.run(chromedp.Click(chromedp.CSS(`#clear-filters`)))
	b.until("filters cleared again", `document.querySelectorAll('#servers-table tbody tr').length === 2`)

	// The skills page: "send" has no available provider and comes first.
	b.run(chromedp.Navigate(base + "/ui/#/skills"))
	b.until("skills page", `(() => { const r = document.querySelector('#skills-table tbody tr');`+
		` return !!r && r.dataset.skill === 'send' && r.cells[1].textContent.includes('none of 1'); })()`)

	// Recovery, seen on the server page of mail, with its audit timeline.
	b.run(chromedp.Navigate(base + "/ui/#/server/" + mail.ServerID.String()))
	b.until("server page", `document.getElementById('server-title').textContent === 'mail' && `+
		`document.querySelectorAll('#server-audit li').length === 3`)
	if _, err := c.Heartbeat(ctx, mail.ServerID); err != nil {
		t.Fatal(err)
	}
	b.until("mail recovered on its page", `document.querySelector('#server-status .status').dataset.status === 'healthy' && `+
		`document.querySelectorAll('#server-audit li').length === 4 && `+
		`document.querySelector('#server-audit li .kind').textContent === 'recovered' && `+
		`[...document.querySelectorAll('#server-skills tbody tr')].every((tr) => tr.cells[1].textContent === '✔available')`)
	b.run(chromedp.Navigate(base + "/ui/#/servers"))
	b.until("mail recovered", statusOf("mail")+` === 'healthy'`)
	if !eval[bool](b, `window.noReload === 1 && performance.getEntriesByType('navigation').length === 1`) {
		t.Fatal("the page was reloaded")
	}

	// The token: in sessionStorage only; not in a cookie, a URL or the
	// page's address; no request went to another origin.
	if !eval[bool](b, `sessionStorage.getItem('mcpd.board.token') === '`+ten.read+`' && localStorage.length === 0 && document.cookie === ''`) {
		t.Fatal("the token is not (only) in sessionStorage")
	}
	cookies, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil || len(cookies.Cookies) != 0 {
		t.Fatalf("cookies: %v %v", cookies.Cookies, err)
	}
	checkRequests(t, b, base, ten.read)

	// Sign out: the token is gone.
	b.run(chromedp.Click(chromedp.CSS(`#signout`)))
	b.until("signed out", `!document.getElementById('signin-view').hidden && sessionStorage.length === 0`)

	// A token that expires while the board is open: back to the sign-in,
	// saying why. It lives long enough for a loaded machine to sign in
	// and draw the board first (2 s did not, beside two busy loops).
	short, err := auth.Issue(ten.secret, ten.id, "board-test", auth.ScopeRead, 6*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.signIn(short)
	b.until("signed in briefly", statusOf("calendar")+` === 'healthy'`)
	b.until("expired while open", `!document.getElementById('signin-view').hidden && `+
		`/expired/.test(document.getElementById('signin-error').textContent) && sessionStorage.length === 0`)
}

// auth403Scope is a scope that is neither mcp:read nor mcp:write.
const auth403Scope = "other:thing"

// checkRequests fails t when a request of b went to another origin than
// base, or carried token in its URL.
func checkRequests(t *testing.T, b *browser, base, token string) {
	t.Helper()
	reqs := b.requests()
	if len(reqs) == 0 {
		t.Fatal("no request seen")
	}
	origin, _ := url.Parse(base)
	for _, r := range reqs {
		u, err := url.Parse(r)
		if err != nil || u.Scheme+"://"+u.Host != origin.Scheme+"://"+origin.Host {
			t.Errorf("request to another origin: %s", r)
		}
		if strings.Contains(r, token) || strings.Contains(r, token[strings.LastIndexByte(token, '.')+1:]) {
			t.Errorf("the token is in a URL: %s", r)
		}
	}
	href := eval[string](b, `location.href`)
	if strings.Contains(href, token) {
		t.Errorf("the token is in the page's address: %s", href)
	}
}

// TestBrowserReconnectAfterRestart: mcpd on PostgreSQL stops; the board
// says it is reconnecting; transitions happen while it is down; mcpd starts
// again on the same address and the board shows every one of them, without
// a reload, resuming from the last id it had.
func TestBrowserReconnectAfterRestart(t *testing.T) {
	b := newBrowser(t)
	db := pgtest.NewDB(t)
	ten, secretFile := newTenant(t)
	cfg := devConfig(secretFile)
	cfg.Dev = false
	cfg.DatabaseURL = db.AppURL
	cfg.ShutdownTimeout = 5 * time.Second
	d, stop := startDaemon(t, cfg, nil)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	ctx := context.Background()
	alpha := register(t, c, "alpha", "query")
	beta := register(t, c, "beta", "query")

	b.run(chromedp.Navigate(base + "/ui/"))
	b.signIn(ten.read)
	b.until("listed", statusOf("alpha")+` === 'healthy' && `+statusOf("beta")+` === 'healthy'`)
	b.until("live", `document.getElementById('conn').dataset.state === 'live'`)
	eval[int](b, `window.noReload = 1`)
	// A transition while connected, so that the board holds a last id.
	if _, err := c.Deregister(ctx, alpha.ServerID); err != nil {
		t.Fatal(err)
	}
	b.until("alpha deregistered", statusOf("alpha")+` === 'deregistered'`)

	stop()
	b.until("reconnecting", `document.getElementById('conn').dataset.state === 'reconnecting' && `+
		`document.getElementById('conn').textContent.startsWith('Reconnecting')`)

	// While mcpd is down for the board, another replica changes things.
	cfg2 := cfg
	d2, stop2 := startDaemon(t, cfg2, nil)
	c2 := client.New("http://"+d2.Addr(), ten.write)
	defer c2.CloseIdleConnections()
	if _, err := c2.Deregister(ctx, beta.ServerID); err != nil {
		t.Fatal(err)
	}
	gamma := register(t, c2, "gamma", "query", "plot")
	register(t, c2, "alpha", "query") // registered again: healthy
	stop2()
	if !eval[bool](b, `document.getElementById('conn').dataset.state === 'reconnecting'`) {
		t.Fatal("the board did not stay reconnecting while mcpd was down")
	}

	cfg.Listen = d.Addr()
	startDaemon(t, cfg, nil)
	b.until("live again", `document.getElementById('conn').dataset.state === 'live'`)
	b.until("every transition", statusOf("beta")+` === 'deregistered' && `+statusOf("gamma")+` === 'healthy' && `+
		statusOf("alpha")+` === 'healthy'`)
	b.until("gamma's skills", `[...document.querySelectorAll('#servers-table tbody tr')]`+
		`.find((tr) => tr.dataset.serverId === '`+gamma.ServerID.String()+`').cells[5].textContent === '2/2'`)
	if !eval[bool](b, `window.noReload === 1 && performance.getEntriesByType('navigation').length === 1`) {
		t.Fatal("the page was reloaded")
	}
	// Resumed, not listed again: one list of servers in all.
	lists := 0
	for _, r := range b.requests() {
		if strings.Contains(r, "/v1/mcp/servers?") {
			lists++
		}
	}
	if lists != 1 {
		t.Fatalf("%d lists of servers, want 1 (resume from the last id, no re-list)", lists)
	}
	checkRequests(t, b, base, ten.read)
}

// TestBrowserRelistsOn410: mcpd --dev restarts with the same secret, its
// memory trail gone, so the board's last id is answered 410; the board
// lists again and follows from the new list: the old process's servers go,
// the new one's show.
func TestBrowserRelistsOn410(t *testing.T) {
	b := newBrowser(t)
	ten, secretFile := newTenant(t)
	cfg := devConfig(secretFile)
	cfg.ShutdownTimeout = 5 * time.Second
	d, stop := startDaemon(t, cfg, nil)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	register(t, c, "alpha", "query")

	b.run(chromedp.Navigate(base + "/ui/"))
	b.signIn(ten.read)
	b.until("listed", statusOf("alpha")+` === 'healthy'`)
	b.until("live", `document.getElementById('conn').dataset.state === 'live'`)
	eval[int](b, `window.noReload = 1`)
	// An event, so that the board holds an id of this process's trail.
	register(t, c, "beta", "query")
	b.until("beta", statusOf("beta")+` === 'healthy'`)

	stop()
	// The client's kept-alive connection was to the old process: a POST on
	// it is not retried (EOF).
	c.CloseIdleConnections()
	cfg.Listen = d.Addr()
	startDaemon(t, cfg, nil)
	register(t, c, "gamma", "plot")
	b.until("listed again", statusOf("gamma")+` === 'healthy' && `+statusOf("alpha")+` === '' && `+
		`document.getElementById('conn').dataset.state === 'live'`)
	b.until("gamma's skills", `document.querySelector('#servers-table tbody tr').cells[5].textContent === '1/1'`)
	if !eval[bool](b, `window.noReload === 1`) {
		t.Fatal("the page was reloaded")
	}
	lists := 0
	for _, r := range b.requests() {
		if strings.Contains(r, "/v1/mcp/servers?") {
			lists++
		}
	}
	if lists != 2 {
		t.Fatalf("%d lists of servers, want 2 (the first, and one after the 410)", lists)
	}
}
