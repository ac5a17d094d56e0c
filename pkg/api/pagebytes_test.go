package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/registry"
)

// registerLarge registers n servers of the bundle's tenant with
// advertisements of size bytes, straight into the store.
func (b *bundle) registerLarge(t *testing.T, n, size int) []string {
	t.Helper()
	caps := json.RawMessage(`{"tools":{"listChanged":true},"blob":"` + strings.Repeat("y", size) + `"}`)
	var modules []string
	for i := range n {
		info := registry.ServerInfo{ModuleName: fmt.Sprintf("large-%03d", i), Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}, CapabilityAdvertisement: caps}
		if _, _, _, err := b.store.Register(t.Context(), b.tenant, info, 0); err != nil {
			t.Fatal(err)
		}
		modules = append(modules, info.ModuleName)
	}
	return modules
}

// A page of large servers is shorter than its limit and carries a
// next_cursor; paging through gives every server once, and the streamed
// answer is byte for byte what json.Marshal makes of it.
func TestServerListBoundedByBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want := b.registerLarge(t, 24, 200_000)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 24 {
			t.Fatal("no last page after 24 pages")
		}
		path := "/v1/mcp/servers?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		resp := b.get(t, path)
		if resp.code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.code, resp.body)
		}
		list := decode[api.ServerList](t, resp)
		again, err := json.Marshal(list)
		if err != nil || !bytes.Equal(again, resp.body) {
			t.Fatalf("the streamed answer (%d bytes) differs from its encoding (%d bytes): %v", len(resp.body), len(again), err)
		}
		if pages == 0 {
			if len(list.Servers) >= 24 || list.NextCursor == nil {
				t.Fatalf("first page: %d servers, next_cursor %v; want a page bounded by bytes", len(list.Servers), list.NextCursor)
			}
			if len(resp.body) > registry.MaxPageBytes+300_000 {
				t.Fatalf("first page is %d bytes, want about %d", len(resp.body), registry.MaxPageBytes)
			}
			t.Logf("first page: %d servers of 200 KB, %d bytes", len(list.Servers), len(resp.body))
		}
		for _, s := range list.Servers {
			got = append(got, s.ModuleName)
		}
		if list.NextCursor == nil {
			break
		}
		cursor = *list.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged through %v, want every server once: %v", got, want)
	}
	// An empty list is still an empty array.
	other := setup(t)
	if resp := other.get(t, "/v1/mcp/servers"); !strings.HasPrefix(string(resp.body), `{"servers":[],"next_cursor":null,"watch_cursor":"`) {
		t.Fatalf("empty list: %s", resp.body)
	}
}

// deadlineRecorder is a ResponseRecorder that records the write deadline
// the handler sets.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadline time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error { d.deadline = t; return nil }

// The list's body must be out by the request's deadline: the handler sets
// the connection's write deadline to it, so a client that reads too slowly
// cannot hold mcpd past the request timeout.
func TestServerListWriteDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	b := setup(t, setupOptions{requestTimeout: timeout})
	b.registerLarge(t, 2, 1000)
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	r := httptest.NewRequest(http.MethodGet, "/v1/mcp/servers", nil)
	r.Header.Set("Authorization", "Bearer "+b.token)
	start := time.Now()
	b.handler.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if rec.deadline.IsZero() {
		t.Fatal("no write deadline set")
	}
	if d := rec.deadline.Sub(start); d <= 0 || d > timeout+time.Second {
		t.Fatalf("write deadline %s after the start, want within the request timeout %s", d, timeout)
	}
}
