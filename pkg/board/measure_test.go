package board_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

var (
	screenshotDir = flag.String("board.screenshots", "",
		"write screenshots of the board (light and dark) into this directory, as docs/img holds them")
	measure = flag.Bool("board.measure", false,
		"measure the board with 10,000 servers in Chromium (figures in the log, for docs/performance.md)")
)

// TestBrowserScreenshots takes the screenshots of docs/img: a small
// registry with every status, in the light and the dark scheme. Only with
// -board.screenshots DIR.
func TestBrowserScreenshots(t *testing.T) {
	if *screenshotDir == "" {
		t.Skip("screenshots only with -board.screenshots DIR")
	}
	b := newBrowser(t)
	ten, secretFile := newTenant(t)
	interval := registry.DefaultHeartbeatInterval
	// The fake clock ends near the present, so that ages read true.
	clock := clockwork.NewFakeClockAt(time.Now().Add(-4 * interval))
	d, _ := startDaemon(t, devConfig(secretFile), clock)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	ctx := context.Background()

	fleet := map[string][]string{
		"calendar": {"search-events", "create-event"}, "crm-sync": {"find-contact", "update-deal"},
		"docs-search": {"search-docs"}, "email": {"send-mail", "search-mail"}, "github-issues": {"search-issues", "create-issue"},
		"jira": {"create-ticket"}, "knowledge-base": {"search-docs", "answer"}, "payments": {"refund", "charge"},
		"pdf-render": {"render-pdf"}, "slack-notify": {"post-message"}, "translate": {"translate-text"},
		"vector-store": {"similarity-search", "upsert-vectors"}, "weather": {"forecast"}, "web-fetch": {"fetch-url"},
	}
	ids := map[string]registry.Server{}
	for name, skills := range fleet {
		ids[name] = register(t, c, name, skills...)
	}
	beat := func(skip ...string) {
		t.Helper()
	next:
		for name, s := range ids {
			for _, k := range skip {
				if k == name {
					continue next
				}
			}
			if _, err := c.Heartbeat(ctx, s.ServerID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * interval) // every one degraded
	statusIs(t, c, ids["web-fetch"].ServerID, registry.StatusDegraded)
	beat("payments", "pdf-render")
	clock.Advance(interval) // payments and pdf-render unhealthy
	statusIs(t, c, ids["payments"].ServerID, registry.StatusUnhealthy)
	beat("payments", "pdf-render", "translate")
	clock.Advance(interval) // translate degraded
	statusIs(t, c, ids["translate"].ServerID, registry.StatusDegraded)
	beat("payments", "pdf-render", "translate", "crm-sync")

	b.run(chromedp.Navigate(base + "/ui/"))
	b.signIn(ten.read)
	b.until("listed", `document.querySelectorAll('#servers-table tbody tr').length === 14 && `+
		`document.getElementById('conn').dataset.state === 'live' && `+
		`document.querySelector('#servers-table tbody tr').cells[5].textContent !== '…'`)
	// A transition seen live, so that its row is highlighted.
	if _, err := c.Deregister(ctx, ids["weather"].ServerID); err != nil {
		t.Fatal(err)
	}
	b.until("weather deregistered", statusOf("weather")+` === 'deregistered'`)
	shoot := func(name, scheme string) {
		t.Helper()
		if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		}); err != nil {
			t.Fatal(err)
		}
		eval[int](b, `document.activeElement.blur(), 0`)
		// The scheme applied, and a frame painted with it.
		b.until("the "+scheme+" scheme", `matchMedia('(prefers-color-scheme: `+scheme+`)').matches`)
		eval[int](b, `window.mcpdPainted = false, requestAnimationFrame(() => requestAnimationFrame(() => { window.mcpdPainted = true })), 0`)
		b.until("a frame painted", `window.mcpdPainted`)
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*screenshotDir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shoot("board-light.png", "light")
	shoot("board-dark.png", "dark")
	b.run(chromedp.Navigate(base + "/ui/#/server/" + ids["payments"].ServerID.String()))
	b.until("server page", `document.querySelectorAll('#server-audit li').length === 3`)
	shoot("board-server-light.png", "light")
	b.run(chromedp.Navigate(base + "/ui/#/skills"))
	b.until("skills page", `document.querySelectorAll('#skills-table tbody tr').length > 10`)
	shoot("board-skills-dark.png", "dark")
}

// TestBrowserTenThousand measures the board with 10,000 servers (20,000
// skills): the first render after sign-in, one transition, and 10,000 at
// once, by the page's performance timeline and Chromium's main-thread task
// time. Only with -board.measure; the figures go to the log, never into an
// assertion.
func TestBrowserTenThousand(t *testing.T) {
	if !*measure {
		t.Skip("measured only with -board.measure")
	}
	const servers = 10000
	b := newBrowser(t)
	ten, secretFile := newTenant(t)
	clock := clockwork.NewFakeClockAt(time.Now())
	cfg := devConfig(secretFile)
	cfg.TenantRateLimit = 0
	d, _ := startDaemon(t, cfg, clock)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	ctx := context.Background()

	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				req := apiwire.RegisterRequest{ModuleName: fmt.Sprintf("module-%05d", i), Version: "1.0.0",
					SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{
						{Name: fmt.Sprintf("skill-%04d", i%5000)}, {Name: fmt.Sprintf("skill-%04d", (i+1)%5000)}}}
				if _, _, err := c.Register(ctx, req, ""); err != nil {
					t.Errorf("register %s: %v", req.ModuleName, err)
				}
			}
		})
	}
	for i := range servers {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("registered %d servers in %s", servers, time.Since(start).Round(time.Millisecond))

	if _, err := chromedp.Call(b.ctx, performance.Enable, performance.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	taskTime := func() float64 {
		t.Helper()
		m, err := chromedp.Call(b.ctx, performance.GetMetrics, struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range m.Metrics {
			if x.Name == "TaskDuration" {
				return x.Value * 1000
			}
		}
		t.Fatal("no TaskDuration metric")
		return 0
	}
	durationOf := func(name string) float64 {
		return eval[float64](b, `(() => { const e = performance.getEntriesByName('`+name+`', 'measure'); return e.length ? e[e.length-1].duration : -1; })()`)
	}

	b.run(chromedp.Navigate(base + "/ui/"))
	eval[int](b, `window.longTasks = [], new PerformanceObserver((l) => window.longTasks.push(...l.getEntries().map((e) => e.duration))).observe({type: 'longtask'}), 0`)
	b.signIn(ten.read)
	testwait.Until(t, "first render", time.Minute, func() bool { return durationOf("mcpd:first-render") >= 0 })
	testwait.Until(t, "skills listed", time.Minute, func() bool { return durationOf("mcpd:skills-listed") >= 0 })
	b.until("live", `document.getElementById('conn').dataset.state === 'live'`)
	t.Logf("first render (sign-in to the list painted): %.0f ms; skills listed: %.0f ms; long tasks: %s",
		durationOf("mcpd:first-render"), durationOf("mcpd:skills-listed"), eval[string](b, `JSON.stringify(window.longTasks.map(Math.round))`))

	// Let the page settle (the skills' answer parsed and collected: the
	// main thread goes idle), then an idle second as the baseline of the
	// task time.
	eval[int](b, `window.mcpdIdle = false, requestIdleCallback(() => { window.mcpdIdle = true }, {timeout: 10000}), 0`)
	b.until("the page idle", `window.mcpdIdle`)
	before := taskTime()
	time.Sleep(time.Second)
	t.Logf("idle second: main-thread task time %.1f ms", taskTime()-before)

	// Single transitions: rows of the first page deregistered one by one.
	for i := range 5 {
		module := fmt.Sprintf("module-%05d", i)
		eval[int](b, `window.longTasks = [], performance.clearMeasures(), 0`)
		list, err := c.AllServers(ctx, client.ListServersParams{ModuleName: module})
		if err != nil || len(list) != 1 {
			t.Fatalf("%s: %v %v", module, list, err)
		}
		before := taskTime()
		if _, err := c.Deregister(ctx, list[0].ServerID); err != nil {
			t.Fatal(err)
		}
		b.until(module+" deregistered", statusOf(module)+` === 'deregistered'`)
		t.Logf("one transition: apply %.2f ms + render %.2f ms; main-thread task time from the call to the row shown %.1f ms; long tasks: %s",
			eval[float64](b, `performance.getEntriesByName('mcpd:apply').reduce((a, e) => a + e.duration, 0)`),
			eval[float64](b, `performance.getEntriesByName('mcpd:render').reduce((a, e) => a + e.duration, 0)`),
			taskTime()-before, eval[string](b, `JSON.stringify(window.longTasks.map(Math.round))`))
	}

	// 10,000 transitions at once: two silent intervals, every server degraded.
	eval[int](b, `window.longTasks = [], performance.clearMeasures(), 0`)
	before = taskTime()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * registry.DefaultHeartbeatInterval)
	testwait.Until(t, "all degraded", time.Minute, func() bool {
		return eval[bool](b, `document.querySelector('#counts [data-status=degraded] .n').textContent === '9,995'`)
	})
	t.Logf("%d transitions at once: feed read and parsed %.1f ms, apply %.1f ms in %d batches + render %.1f ms in %d frames; main-thread task time %.1f ms; long tasks: %s",
		servers-5, eval[float64](b, `performance.getEntriesByName('mcpd:feed').reduce((a, e) => a + e.duration, 0)`),
		eval[float64](b, `performance.getEntriesByName('mcpd:apply').reduce((a, e) => a + e.duration, 0)`),
		eval[int](b, `performance.getEntriesByName('mcpd:apply').length`),
		eval[float64](b, `performance.getEntriesByName('mcpd:render').reduce((a, e) => a + e.duration, 0)`),
		eval[int](b, `performance.getEntriesByName('mcpd:render').length`),
		taskTime()-before, eval[string](b, `JSON.stringify(window.longTasks.map(Math.round))`))
}
