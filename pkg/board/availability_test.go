package board_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/cli"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

// TestAvailabilitySameEverywhere: one server with an outage, and the same
// figures of its last 24 hours from the endpoint, mcpctl (servers
// availability -o json, servers list -o wide), the MCP tool get_server and
// the web board in chromium (the servers table, the server page's bar with
// its outage marked and listed in words, the skills page); the clock is
// fake and stands still while they are read.
func TestAvailabilitySameEverywhere(t *testing.T) {
	b := newBrowser(t)
	ten, secretFile := newTenant(t)
	clock := clockwork.NewFakeClockAt(time.Now())
	d, _ := startDaemon(t, devConfig(secretFile), clock)
	base := "http://" + d.Addr()
	c := client.New(base, ten.write)
	defer c.CloseIdleConnections()
	ctx := context.Background()

	calendar := register(t, c, "calendar", "search", "schedule")
	mail := register(t, c, "mail", "search")
	// Two intervals: both degraded; mail heartbeats. A third: calendar
	// unhealthy; then it heartbeats and recovers.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * registry.DefaultHeartbeatInterval)
	statusIs(t, c, calendar.ServerID, registry.StatusDegraded)
	if _, err := c.Heartbeat(ctx, mail.ServerID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(registry.DefaultHeartbeatInterval)
	statusIs(t, c, calendar.ServerID, registry.StatusUnhealthy)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(registry.DefaultHeartbeatInterval / 2)
	if _, err := c.Heartbeat(ctx, calendar.ServerID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, mail.ServerID); err != nil {
		t.Fatal(err)
	}
	statusIs(t, c, calendar.ServerID, registry.StatusHealthy)
	// From here the clock stands still: every surface reads the same window.

	api, err := c.ServerAvailability(ctx, calendar.ServerID, registry.Window24h)
	if err != nil {
		t.Fatal(err)
	}
	if len(api.Outages) != 1 || api.Outages[0].Status != registry.StatusUnhealthy || api.AvailableRatio == nil || *api.AvailableRatio >= 1 {
		t.Fatalf("endpoint: %+v, want one unhealthy outage", api)
	}
	want := output.Percent(api.AvailableRatio)
	skill, err := c.SkillAvailability(ctx, "schedule", registry.Window24h)
	if err != nil {
		t.Fatal(err)
	}
	if *skill.AvailableRatio != *api.AvailableRatio {
		t.Fatalf("schedule, offered by calendar alone: %v, want calendar's %v", *skill.AvailableRatio, *api.AvailableRatio)
	}
	search, err := c.SkillAvailability(ctx, "search", registry.Window24h)
	if err != nil {
		t.Fatal(err)
	}
	if *search.AvailableRatio != 1 {
		t.Fatalf("search, offered by mail too, up all along: %v, want 1", *search.AvailableRatio)
	}

	// mcpctl.
	mcpctl := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args, "--server", base, "--token", ten.read)
		if code := cli.Main(ctx, args, &cli.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}); code != 0 {
			t.Fatalf("mcpctl %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	var got registry.Availability
	if err := json.Unmarshal([]byte(mcpctl("servers", "availability", "calendar", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, api) {
		t.Fatalf("mcpctl servers availability: %+v, want the endpoint's %+v", got, api)
	}
	wide := mcpctl("servers", "list", "-o", "wide")
	ratio := strconv.FormatFloat(*api.AvailableRatio, 'f', -1, 64)
	if !bytes.Contains([]byte(wide), []byte(calendar.ServerID.String()+"\tcalendar\t1.2.0\thealthy\t"+ratio+"\t")) {
		t.Fatalf("mcpctl servers list -o wide:\n%s\nwant calendar's ratio %s", wide, ratio)
	}

	// The MCP tool.
	mc := mcp.NewClient(&mcp.Implementation{Name: "board-test", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: ten.read}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserve.ToolGetServer, Arguments: map[string]any{"module_name": "calendar"}})
	if err != nil || res.IsError {
		t.Fatalf("get_server: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var detail mcpserve.ServerDetail
	if err := json.Unmarshal(raw, &detail); err != nil {
		t.Fatal(err)
	}
	if detail.Availability24h == nil || !reflect.DeepEqual(*detail.Availability24h, api) {
		t.Fatalf("get_server availability_24h: %+v, want the endpoint's %+v", detail.Availability24h, api)
	}

	// The board.
	b.run(chromedp.Navigate(base + "/ui/"))
	b.signIn(ten.read)
	b.until("calendar's 24 h column", `(() => { const r = [...document.querySelectorAll('#servers-table tbody tr')]`+
		`.find((tr) => tr.querySelector('th').textContent === 'calendar'); return !!r && r.cells[7].textContent === '`+want+`'; })()`)
	b.until("mail's 24 h column", `(() => { const r = [...document.querySelectorAll('#servers-table tbody tr')]`+
		`.find((tr) => tr.querySelector('th').textContent === 'mail'); return !!r && r.cells[7].textContent === '100.000%'; })()`)

	b.run(chromedp.Navigate(base + "/ui/#/server/" + calendar.ServerID.String()))
	b.until("the bar on the server page", `(() => { const a = document.querySelector('#server-avail');`+
		` return !!a && !!a.querySelector('.avail-bar') && a.querySelector('.avail-ratio').textContent === '`+want+`'; })()`)
	// The outage: a mark on the bar named in words (no colour needed), and
	// a line of the list.
	if n := eval[int](b, `document.querySelectorAll('#server-avail .avail-bar .outage[data-status=unhealthy]').length`); n != 1 {
		t.Fatalf("%d outage marks, want 1", n)
	}
	if !eval[bool](b, `/1 outage/.test(document.querySelector('#server-avail .avail-bar').getAttribute('aria-label'))`+
		` && /^unhealthy /.test(document.querySelector('#server-avail .avail-bar .outage').title)`+
		` && /^unhealthy from \d\d:\d\d to \d\d:\d\d/.test(document.querySelector('#server-avail .avail-outages li').textContent)`) {
		t.Fatalf("the outage is not named in words:\n%s", eval[string](b, `document.querySelector('#server-avail').outerHTML`))
	}

	b.run(chromedp.Navigate(base + "/ui/#/skills"))
	for name, p := range map[string]string{"schedule": want, "search": "100.000%"} {
		b.until("skill "+name+"'s 24 h column", `(() => { const r = document.querySelector('#skills-table tbody tr[data-skill="`+name+`"]');`+
			` return !!r && r.cells[3].textContent === '`+p+`'; })()`)
	}

	// A transition makes a row's figure old at once, without a reload:
	// two intervals later both servers are degraded, and calendar's row
	// shows its ratio of then (its outage is a smaller share of a longer
	// observed time).
	b.run(chromedp.Navigate(base + "/ui/#/servers"))
	b.until("servers page", `document.querySelectorAll('#servers-table tbody tr').length === 2`)
	eval[int](b, `window.noReload = 1`)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * registry.DefaultHeartbeatInterval)
	statusIs(t, c, calendar.ServerID, registry.StatusDegraded)
	statusIs(t, c, mail.ServerID, registry.StatusDegraded)
	later, err := c.ServerAvailability(ctx, calendar.ServerID, registry.Window24h)
	if err != nil {
		t.Fatal(err)
	}
	if output.Percent(later.AvailableRatio) == want {
		t.Fatalf("the ratio did not move (%s): the check below could not fail", want)
	}
	b.until("calendar's row after its transition", `(() => { const r = [...document.querySelectorAll('#servers-table tbody tr')]`+
		`.find((tr) => tr.querySelector('th').textContent === 'calendar'); return !!r && r.dataset.status === 'degraded'`+
		` && r.cells[7].textContent === '`+output.Percent(later.AvailableRatio)+`'; })()`)
	if !eval[bool](b, `window.noReload === 1`) {
		t.Fatal("the page reloaded")
	}
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
