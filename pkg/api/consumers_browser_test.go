package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// The registry clients that read mcpd by URL, replayed from a real headless
// Chromium page on another origin: their exact request sequences, read
// from their source, without a token, through --registry-public-tenant and
// CORS.
//
// VS Code (microsoft/vscode):
//   - src/vs/workbench/services/mcp/browser/mcpGalleryManifestService.ts
//     (8a19ae3): the URL of the setting chat.mcp.gallery.serviceUrl, then
//   - src/vs/platform/mcp/common/mcpGalleryManifestService.ts (79c1f16):
//     checkVersion probes GET {url}/v0.1/servers?limit=1; the resources are
//     {url}/v0.1/servers, …/servers/{name}/versions/latest and
//     …/servers/{name}/versions/{version};
//   - src/vs/platform/mcp/common/mcpGalleryService.ts (e24a16c):
//     queryRawGalleryMcpServers lists {servers}?limit=50&version=latest and
//     appends &cursor={nextCursor} as given (not escaped);
//     getLatestServerVersionUrl escapes the name with encodeURIComponent;
//     getMcpServer takes any 4xx for "no such server"; the v0.1 serializer
//     reads server.name, description, version and the official block's
//     status, isLatest, publishedAt, updatedAt.
//
// The Copilot CLI (npm @github/copilot-linux-x64 1.0.102, its bundled
// package/cli-main.js, in the single-executable asset copilot.tgz; the
// github/copilot-cli repository holds no source): RegistryClient takes a
// base URL ending in /v0.1, adds a slash; listServersPage GETs
// new URL("servers", base) with searchParams search, cursor and limit,
// following metadata.nextCursor; getServer GETs
// servers/{encodeURIComponent(name)}/versions/latest (or /versions/{v}) and
// takes 404 for "not found", any other failure for an error with its
// status (github/copilot-cli#3772: a 401 or 403 blocks the server);
// fetchWithTimeout sends Accept: application/json and no Authorization;
// filterLatestVersions keeps the entry with the newest official updatedAt.

// vscodeJS replays VS Code's sequence against url (the setting's value) and
// resolves to what VS Code would make of it.
const vscodeJS = `async (url, name) => {
	const log = [];
	const get = async (u) => {
		const r = await fetch(u);
		log.push(r.status + " " + u.slice(url.length));
		let body = null;
		try { body = await r.json(); } catch (e) {}
		return {status: r.status, ok: r.ok, body};
	};
	const probe = await get(url + "/v0.1/servers?limit=1");
	const serversUrl = url + "/v0.1/servers";
	const names = [], statuses = [];
	let cursor, pages = 0;
	do {
		let u = serversUrl + "?limit=50&version=latest";
		if (cursor) { u += "&cursor=" + cursor; }
		const p = await get(u);
		if (!p.ok) { return {error: p.status, log}; }
		for (const s of p.body.servers) {
			if (!s.server.name || !s.server.description || !s.server.version) { return {error: "serializer", log}; }
			const info = s._meta["io.modelcontextprotocol.registry/official"];
			names.push(s.server.name);
			statuses.push((info && info.status) || "active");
		}
		cursor = p.body.metadata.nextCursor;
		pages++;
	} while (cursor && pages < 10);
	const latest = await get(serversUrl + "/" + encodeURIComponent(name) + "/versions/latest");
	let exact = null;
	if (latest.ok) {
		exact = await get(serversUrl + "/" + encodeURIComponent(name) + "/versions/" + latest.body.server.version);
	}
	const found = latest.status >= 400 && latest.status < 500 ? null : latest.body;
	const info = found && found._meta["io.modelcontextprotocol.registry/official"];
	return {probe: probe.status, pages, names, statuses, found: found ? found.server.name : null,
		isLatest: info ? info.isLatest : null, exact: exact ? exact.status : null, log};
}`

// copilotJS replays the Copilot CLI's RegistryClient against base (the
// registry URL with /v0.1).
const copilotJS = `async (base, name) => {
	base = base.endsWith("/") ? base : base + "/";
	const log = [];
	const fetchWithTimeout = async (u) => {
		const r = await fetch(u, {headers: {Accept: "application/json"}});
		log.push(r.status + " " + u.slice(base.length - 1));
		return r;
	};
	const all = [];
	let cursor;
	do {
		const o = new URL("servers", base);
		if (cursor) { o.searchParams.set("cursor", cursor); }
		const r = await fetchWithTimeout(o.toString());
		if (!r.ok) { return {error: "Failed to list servers", status: r.status, log}; }
		const j = await r.json();
		all.push(...j.servers);
		cursor = j.metadata && j.metadata.nextCursor;
	} while (cursor);
	const latestByName = new Map();
	for (const e of all) {
		const prev = latestByName.get(e.server.name);
		const meta = (x) => (x._meta || {})["io.modelcontextprotocol.registry/official"];
		if (!prev || new Date((meta(e) || {}).updatedAt || 0) > new Date((meta(prev) || {}).updatedAt || 0)) {
			latestByName.set(e.server.name, e);
		}
	}
	const getServer = async (version) => {
		const a = version && version !== "latest" ? "/versions/" + version : "/versions/latest";
		const r = await fetchWithTimeout(new URL("servers/" + encodeURIComponent(name) + a, base).toString());
		if (r.status === 404) { return {verdict: "not found"}; }
		if (!r.ok) { return {verdict: "error", status: r.status}; }
		const d = await r.json();
		return {verdict: "verified", version: d.server.version};
	};
	const latest = await getServer();
	const exact = latest.version ? await getServer(latest.version) : null;
	return {names: [...latestByName.keys()], latest, exact, log};
}`

type vscodeResult struct {
	Error    any      `json:"error"`
	Probe    int      `json:"probe"`
	Pages    int      `json:"pages"`
	Names    []string `json:"names"`
	Statuses []string `json:"statuses"`
	Found    *string  `json:"found"`
	IsLatest *bool    `json:"isLatest"`
	Exact    *int     `json:"exact"`
	Log      []string `json:"log"`
}

type copilotVerdict struct {
	Verdict string `json:"verdict"`
	Status  int    `json:"status"`
	Version string `json:"version"`
}

type copilotResult struct {
	Error  string          `json:"error"`
	Status int             `json:"status"`
	Names  []string        `json:"names"`
	Latest copilotVerdict  `json:"latest"`
	Exact  *copilotVerdict `json:"exact"`
	Log    []string        `json:"log"`
}

// chromiumPage is a headless Chromium tab open on a page of its own origin;
// it records every request the tab makes, preflights included.
type chromiumPage struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	seen []string
}

func openChromiumPage(t *testing.T, pageURL string) *chromiumPage {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if _, err := os.Stat("/usr/bin/chromium"); err != nil {
			pgtest.Missing(t, "chromium not found: the registry consumers' browser test needs it (apt-get install chromium)")
		}
		path = "/usr/bin/chromium"
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")),
	)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	p := &chromiumPage{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			p.mu.Lock()
			p.seen = append(p.seen, e.Request.Method+" "+e.Request.URL)
			p.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("chromium: open %s: %v", pageURL, err)
	}
	return p
}

// call runs an async JavaScript function of the page with args and decodes
// what it resolves to.
func call[T any](p *chromiumPage, fn string, args ...string) T {
	p.t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		b, _ := json.Marshal(a)
		quoted[i] = string(b)
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](
		"("+fn+")("+strings.Join(quoted, ", ")+")", chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("chromium: %v", err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		p.t.Fatalf("chromium answered %s: %v", raw, err)
	}
	return v
}

// VS Code's and the Copilot CLI's registry clients, replayed from a page of
// another origin, list mcpd's live servers without a token (the public
// tenant), page through 51 of them, read versions/latest and an exact
// version; a server that dies leaves their next list, and its
// versions/latest is their "not found". /v1 stays closed to the page.
func TestRegistryConsumersFromABrowser(t *testing.T) {
	b := setup(t, setupOptions{public: true})
	api := httptest.NewServer(b.handler)
	defer api.Close()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>an IDE on another origin</title>"))
	}))
	defer page.Close()
	if strings.EqualFold(api.URL, page.URL) {
		t.Fatal("the page must be on another origin")
	}

	modules := []string{"calendar", "mail"}
	for i := range 49 {
		modules = append(modules, fmt.Sprintf("svc-%02d", i))
	}
	ids := map[string]string{}
	for _, m := range modules {
		ids[m] = b.register(t, m).ServerID.String()
	}
	p := openChromiumPage(t, page.URL)

	vs := call[vscodeResult](p, vscodeJS, api.URL, "local.mcpd/mail")
	t.Logf("VS Code: %v", vs.Log)
	if vs.Error != nil || vs.Probe != 200 || vs.Pages != 2 || len(vs.Names) != 51 || !slices.Contains(vs.Names, "local.mcpd/mail") ||
		vs.Found == nil || *vs.Found != "local.mcpd/mail" || vs.IsLatest == nil || !*vs.IsLatest || vs.Exact == nil || *vs.Exact != 200 {
		t.Fatalf("VS Code's sequence: %+v", vs)
	}
	for _, s := range vs.Statuses {
		if s != "active" {
			t.Fatalf("VS Code reads status %q", s)
		}
	}
	cp := call[copilotResult](p, copilotJS, api.URL+"/v0.1", "local.mcpd/mail")
	t.Logf("Copilot CLI: %v", cp.Log)
	if cp.Error != "" || len(cp.Names) != 51 || cp.Latest.Verdict != "verified" || cp.Latest.Version != "1.3.2" ||
		cp.Exact == nil || cp.Exact.Verdict != "verified" || len(cp.Log) != 4 {
		t.Fatalf("Copilot CLI's sequence: %+v", cp)
	}

	// mail falls silent; the others heartbeat.
	for range 4 {
		b.sweep(t, testInterval)
		for _, m := range modules {
			if m != "mail" {
				b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+ids[m]+`"}`)
			}
		}
	}
	vs = call[vscodeResult](p, vscodeJS, api.URL, "local.mcpd/mail")
	if vs.Error != nil || len(vs.Names) != 50 || slices.Contains(vs.Names, "local.mcpd/mail") || vs.Found != nil || vs.Exact != nil {
		t.Fatalf("VS Code after mail died: %+v", vs)
	}
	if last := vs.Log[len(vs.Log)-1]; last != "404 /v0.1/servers/local.mcpd%2Fmail/versions/latest" {
		t.Fatalf("VS Code's lookup of the dead server: %q", last)
	}
	cp = call[copilotResult](p, copilotJS, api.URL+"/v0.1", "local.mcpd/mail")
	if cp.Error != "" || len(cp.Names) != 50 || slices.Contains(cp.Names, "local.mcpd/mail") || cp.Latest.Verdict != "not found" {
		t.Fatalf("Copilot CLI after mail died: %+v", cp)
	}

	// A page that sends a token and a tag: a preflight, then the token's
	// tenant; the ETag is readable, and sent back it is a 304.
	const tokenJS = `async (url, token) => {
		const h = {Authorization: "Bearer " + token};
		const r = await fetch(url + "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest", {headers: h});
		const etag = r.headers.get("ETag");
		const again = await fetch(url + "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest",
			{headers: {...h, "If-None-Match": etag}, cache: "no-store"});
		let v1 = "";
		try { v1 = String((await fetch(url + "/v1/mcp/servers", {headers: h})).status); } catch (e) { v1 = e.name; }
		let v1plain = "";
		try { v1plain = String((await fetch(url + "/v1/mcp/servers")).status); } catch (e) { v1plain = e.name; }
		return {status: r.status, etag: etag || "", again: again.status, v1, v1plain};
	}`
	tok := call[struct {
		Status  int    `json:"status"`
		ETag    string `json:"etag"`
		Again   int    `json:"again"`
		V1      string `json:"v1"`
		V1Plain string `json:"v1plain"`
	}](p, tokenJS, api.URL, b.readTok)
	if tok.Status != 200 || tok.ETag == "" || tok.Again != 304 || tok.V1 != "TypeError" || tok.V1Plain != "TypeError" {
		t.Fatalf("a page with a token: %+v", tok)
	}
	p.mu.Lock()
	seen := slices.Clone(p.seen)
	p.mu.Unlock()
	preflights := 0
	for _, s := range seen {
		if strings.HasPrefix(s, "OPTIONS ") {
			preflights++
		}
	}
	t.Logf("%d requests, %d preflights", len(seen), preflights)
	if preflights == 0 {
		t.Fatalf("no preflight among %q", seen)
	}
}
