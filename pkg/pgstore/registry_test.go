package pgstore_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// hubSink tells the hub of each event the registrar wrote, as mcpd does.
type hubSink struct{ hub *feed.Hub }

func (s hubSink) Transition(_ context.Context, ev registry.Event) { s.hub.Wrote(ev) }

func newReplica(t *testing.T, db *pgtest.DB, secret []byte) (http.Handler, *pgstore.Store, func() int64) {
	t.Helper()
	ctx := t.Context()
	apiPool, err := pgstore.Connect(ctx, db.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(apiPool.Close)
	hubPool, err := pgstore.Connect(ctx, db.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hubPool.Close)
	store := pgstore.New(apiPool, pgstore.Options{})
	t.Cleanup(store.Close)
	hubStore := pgstore.New(hubPool, pgstore.Options{})
	t.Cleanup(hubStore.Close)
	hub := feed.NewHub(feed.Options{Source: hubStore})

	hctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(hctx) }()
	t.Cleanup(func() { cancel(); <-done })
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, Sink: hubSink{hub}})
	h := api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier, Catalog: store, Feed: hub,
		CursorKey: store.CursorKey})
	return h, store, func() int64 { return apiPool.Stat().AcquireCount() }
}

func call(t *testing.T, h http.Handler, token, method, path, body, inm string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if inm != "" {
		r.Header.Set("If-None-Match", inm)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A follower that polls GET /v0.1/servers with If-None-Match costs the
// database nothing while nothing changes: every 304 is answered from the
// change-feed hub's memory, without a connection taken from the API's
// pool (so without a statement or a transaction). Two replicas give the
// same tag; a heartbeat keeps it, a registration changes it.
func TestRegistryPollCostsTheDatabaseNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	secret := bytes.Repeat([]byte("s"), 32)
	a, _, acquiresA := newReplica(t, db, secret)
	b, _, _ := newReplica(t, db, secret)
	tenant := uuid.New()
	token, err := auth.Issue(secret, tenant, "test", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range []string{"calendar", "mail", "search"} {
		w := call(t, a, token, http.MethodPost, "/v1/mcp/servers/register",
			`{"module_name":"`+m+`","version":"1.0.0","supported_protocols":["2025-06-18"],"skills":[{"name":"s"}]}`, "")
		if w.Code != http.StatusCreated {
			t.Fatalf("register: %d %s", w.Code, w.Body)
		}
		ids = append(ids, strings.Split(strings.Split(w.Body.String(), `"server_id":"`)[1], `"`)[0])
	}
	const list = "/v0.1/servers?limit=10"
	// Once both hubs have read every write, both replicas give the same
	// tag (before that, a's own writes count in its tag at once).
	converged := func() string {
		t.Helper()
		var tag string
		testwait.Eventually(t, "the replicas' tags agree", func() bool {
			tag = call(t, a, token, http.MethodGet, list, "", "").Header().Get("ETag")
			return strings.HasPrefix(tag, `"f`) && tag == call(t, b, token, http.MethodGet, list, "", "").Header().Get("ETag")
		})
		return tag
	}
	tag := converged()
	for _, id := range ids {
		if w := call(t, a, token, http.MethodPost, "/v1/mcp/servers/heartbeat", `{"server_id":"`+id+`"}`, ""); w.Code != http.StatusOK {
			t.Fatalf("heartbeat: %d %s", w.Code, w.Body)
		}
	}

	const polls = 200
	before := acquiresA()
	for i := range polls {
		if w := call(t, a, token, http.MethodGet, list, "", tag); w.Code != http.StatusNotModified {
			t.Fatalf("poll %d: %d, want 304", i, w.Code)
		}
	}
	if n := acquiresA() - before; n != 0 {
		t.Fatalf("%d polls answered 304 took %d connections of the API's pool, want 0", polls, n)
	}
	t.Logf("%d polls answered 304: 0 connections taken, 0 database transactions", polls)

	// The counter counts: a 200 reads the database.
	before = acquiresA()
	if w := call(t, a, token, http.MethodGet, list, "", ""); w.Code != http.StatusOK || acquiresA() == before {
		t.Fatalf("a full answer: %d, %d connections", w.Code, acquiresA()-before)
	}

	// A registration through the other replica: this one's tag changes
	// once its hub has read it.
	if w := call(t, b, token, http.MethodPost, "/v1/mcp/servers/register",
		`{"module_name":"zeta","version":"1.0.0","supported_protocols":["2025-06-18"]}`, ""); w.Code != http.StatusCreated {
		t.Fatalf("register through b: %d", w.Code)
	}
	testwait.Eventually(t, "a sees b's registration", func() bool {
		return call(t, a, token, http.MethodGet, list, "", tag).Code == http.StatusOK
	})
	if newTag := converged(); newTag == tag {
		t.Fatalf("after b's registration: the same tag %s", tag)
	}
}
