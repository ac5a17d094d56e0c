package board_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// installChromium is how to get the browser the tests drive.
const installChromium = "chromium not found: the board's browser tests need it (apt-get install chromium)"

// browserWait bounds every wait on the page.
const browserWait = 15 * time.Second

// chromiumPath returns Debian's chromium, or skips (fails under CI=true).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	pgtest.Missing(t, installChromium)
	return ""
}

// browser is one headless chromium with one tab, and every request URL the
// tab made.
type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	urls []string
}

// newBrowser starts a headless chromium with a fresh profile; it is closed
// at the end of the test.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first call starts the browser: on the tab's own context, never
	// one with a timeout.
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.urls = append(b.urls, e.Request.URL+e.Request.URLFragment)
			b.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return b
}

// run runs actions in the tab, failing the test on an error.
func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

// until polls a JavaScript condition of the page until it is true.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	testwait.Until(b.t, what, browserWait, func() bool { return eval[bool](b, expr) })
}

// requests returns every URL the tab requested so far.
func (b *browser) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.urls...)
}

// signIn types token into the sign-in form and presses its button.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.run(
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		// As a person does (chromedp.Submit would skip the submit event).
		chromedp.Click(chromedp.CSS(`#signin button[type=submit]`)),
	)
}

// statusOf is the expression of the status text of the row of module.
func statusOf(module string) string {
	return `(() => { const r = [...document.querySelectorAll('#servers-table tbody tr')]` +
		`.find((tr) => tr.querySelector('th').textContent === '` + module + `');` +
		` return r ? r.cells[2].textContent.replace(/^\W+/, '') : ''; })()`
}

// tenant is what a test needs to talk to one tenant of an mcpd.
type tenant struct {
	id     uuid.UUID
	secret []byte
	// write registers and heartbeats; read is the token the board gets.
	write, read string
}

// newTenant writes an HS256 secret file and issues tokens of a new tenant.
func newTenant(t *testing.T) (tenant, string) {
	t.Helper()
	secret := []byte(strings.Repeat("board-test-secret-", 3))
	file := filepath.Join(t.TempDir(), "jwt.secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	ten := tenant{id: uuid.New(), secret: secret}
	ten.write = ten.token(t, auth.ScopeRead+" "+auth.ScopeWrite, time.Now())
	ten.read = ten.token(t, auth.ScopeRead, time.Now())
	return ten, file
}

func (ten tenant) token(t *testing.T, scope string, now time.Time) string {
	t.Helper()
	tok, err := auth.Issue(ten.secret, ten.id, "board-test", scope, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// startDaemon runs an in-process mcpd for cfg until the end of the test
// (or stop).
func startDaemon(t *testing.T, cfg config.Config, clock clockwork.Clock) (d *daemon.Daemon, stop func()) {
	t.Helper()
	d, err := daemon.New(cfg, daemon.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := d.Stop(context.Background()); err != nil {
				t.Errorf("stop mcpd: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return d, stop
}

// devConfig is mcpd --dev on a loopback port with the test's secret file.
func devConfig(secretFile string) config.Config {
	cfg := config.Default()
	cfg.Dev = true
	cfg.Listen = "127.0.0.1:0"
	cfg.AuthJWTSecretFile = secretFile
	// The fake clock jumps whole intervals, which the blind-window rule
	// would take for a registry that could not see.
	cfg.BlindAfter = -1
	// Every heartbeat written before it is answered, so that the sweep
	// needs no grace for held ones and the jumps cross 2I and 3I exactly.
	cfg.HeartbeatFlushInterval = 0
	return cfg
}

// register registers module with skills and returns its server.
func register(t *testing.T, c *client.Client, module string, skills ...string) registry.Server {
	t.Helper()
	req := apiwire.RegisterRequest{ModuleName: module, Version: "1.2.0", SupportedProtocols: []string{"2025-06-18"},
		CapabilityAdvertisement: []byte(`{"tools":{"listChanged":true}}`),
		Remotes:                 []registry.Remote{{Type: registry.RemoteStreamableHTTP, URL: remoteOf(module)}}}
	for _, s := range skills {
		req.Skills = append(req.Skills, registry.SkillInfo{Name: s, Description: "does " + s})
	}
	s, _, err := c.Register(context.Background(), req, "")
	if err != nil {
		t.Fatalf("register %s: %v", module, err)
	}
	return s
}

// remoteOf is where the tests say module's server is reached.
func remoteOf(module string) string { return "https://" + module + ".mcp.internal/mcp" }

// statusIs waits until mcpd says module's server has status st.
func statusIs(t *testing.T, c *client.Client, id uuid.UUID, st registry.Status) {
	t.Helper()
	testwait.Eventually(t, "server "+id.String()+" "+string(st), func() bool {
		s, err := c.Server(context.Background(), id)
		return err == nil && s.Status == st
	})
}
