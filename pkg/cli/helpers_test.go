package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"
	"go.uber.org/goleak"
	"gopkg.in/yaml.v3"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testStart is the fake clock's start: every time the tests print is fixed.
var testStart = time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)

// testSecret is made per run: no credential is kept in the tree.
func testSecret(t *testing.T) []byte {
	t.Helper()
	return []byte(strings.Repeat("s", 16) + uuid.NewString()[:16])
}

type testStreams struct {
	io                    *IOStreams
	in, out, errOut       *bytes.Buffer
	inTTY, outTTY, errTTY bool
}

// newTestIO returns streams over buffers; none is a terminal until the
// test says so.
func newTestIO() *testStreams {
	ts := &testStreams{in: &bytes.Buffer{}, out: &bytes.Buffer{}, errOut: &bytes.Buffer{}}
	ts.io = &IOStreams{
		In: ts.in, Out: ts.out, ErrOut: ts.errOut,
		InIsTerminal:  func() bool { return ts.inTTY },
		OutIsTerminal: func() bool { return ts.outTTY },
		ErrIsTerminal: func() bool { return ts.errTTY },
	}
	return ts
}

// bundle is a running mcpd API over memstore and what the tests need of it.
type bundle struct {
	url       string
	secret    []byte
	cursorKey []byte
	tenant    uuid.UUID
	token     string
	clock     *clockwork.FakeClock
	client    *client.Client
	srv       *httptest.Server
}

func setup(t *testing.T) *bundle {
	t.Helper()
	key := make([]byte, 32)
	copy(key, uuid.New().String())
	return setupWith(t, testSecret(t), key, uuid.New())
}

// twin starts a second API, over a store of its own, that takes b's tokens
// and cursors: b's positions are not positions of its trail.
func (b *bundle) twin(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, b.secret, b.cursorKey, b.tenant)
}

func setupWith(t *testing.T, secret, cursorKey []byte, tenant uuid.UUID) *bundle {
	t.Helper()
	clock := clockwork.NewFakeClockAt(testStart)
	store := memstore.New(clock)
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, HeartbeatInterval: 10 * time.Second})
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// The change feed, as the daemon serves it: a hub reading the store,
	// streams that end when the server closes.
	hubCtx, stopHub := context.WithCancel(context.Background())
	hub := feed.NewHub(feed.Options{Source: store})
	hubDone := make(chan struct{})
	go func() {
		defer close(hubDone)
		hub.Run(hubCtx)
	}()
	streams, stopStreams := context.WithCancel(context.Background())
	srv := httptest.NewServer(api.NewHandler(api.HandlerOptions{
		Registrar: reg, Verifier: verifier, Feed: hub, CursorKey: func(context.Context) ([]byte, error) { return cursorKey, nil }, Streams: streams,
		// The token's exp is on the fake clock, as the verifier reads it:
		// on the real one it has long passed and ends every watch at once.
		TokenClock: clock,
	}))
	token, err := auth.Issue(secret, tenant, "test", "mcp:read mcp:write", time.Hour, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(srv.URL, token)
	t.Cleanup(func() {
		stopStreams()
		c.CloseIdleConnections()
		srv.Close()
		stopHub()
		<-hubDone
	})
	return &bundle{url: srv.URL, secret: secret, cursorKey: cursorKey, tenant: tenant, token: token, clock: clock,
		client: c, srv: srv}
}

func (b *bundle) clientFunc() func() (*client.Client, error) {
	return func() (*client.Client, error) { return b.client, nil }
}

// printer returns a printer over ts in format f, measuring ages on b's clock.
func (b *bundle) printer(ts *testStreams, f output.Format) *output.Printer {
	return &output.Printer{Out: ts.out, ErrOut: ts.errOut, Format: f, Terminal: ts.outTTY, Now: b.clock.Now}
}

// register registers module through the API and returns the server.
func (b *bundle) register(t *testing.T, module string, skills ...registry.SkillInfo) registry.Server {
	t.Helper()
	srv, _, err := b.client.Register(context.Background(), api.RegisterRequest{
		ModuleName: module, Version: "1.3.2", SupportedProtocols: []string{"2025-06-18"}, Skills: skills,
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// testFactory returns a factory over ts with a fixed clock and environment.
func testFactory(ts *testStreams, env map[string]string) *Factory {
	f := NewFactory(ts.io)
	f.Now = func() time.Time { return testStart }
	f.Getenv = func(k string) string { return env[k] }
	return f
}

// execute runs a standalone command with args, as cobra would under root.
func execute(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	return cmd.ExecuteContext(context.Background())
}

func isUsage(err error) bool { return err != nil && exitCode(err) == ExitUsage && asUsage(err) }

func asUsage(err error) bool {
	var ue *UsageError
	return errors.As(err, &ue)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// decodeAs decodes b in format f (json or yaml) into v.
func decodeAs(f output.Format, b []byte, v any) error {
	if f == output.YAML {
		return yaml.Unmarshal(b, v)
	}
	return json.Unmarshal(b, v)
}
