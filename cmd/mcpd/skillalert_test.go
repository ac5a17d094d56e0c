package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// skillHook is a webhook receiver that keeps the skill outage bodies.
type skillHook struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []alert.SkillPayload
}

func newSkillHook(t *testing.T) *skillHook {
	h := &skillHook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p alert.SkillPayload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		if p.AlertName != "" {
			h.mu.Lock()
			h.got = append(h.got, p)
			h.mu.Unlock()
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *skillHook) payloads() []alert.SkillPayload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]alert.SkillPayload(nil), h.got...)
}

// Two mcpd replicas on one database, webhook configured on both: the
// servers offering a skill fall silent three times; each outage is raised
// once and resolved once, also when the replica that raised the first one
// is killed (SIGKILL) during it.
func TestSkillOutageAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	hook := newSkillHook(t)
	reps := []*proc{
		startMcpd(t, db.AppURL, "--alert-webhook-url", hook.srv.URL),
		startMcpd(t, db.AppURL, "--alert-webhook-url", hook.srv.URL),
	}
	tenant := uuid.New()
	ctx := context.Background()
	c0, c1 := reps[0].client(t, tenant), reps[1].client(t, tenant)
	for _, c := range []interface{ Readyz(context.Context) error }{c0, c1} {
		testwait.Eventually(t, "ready", func() bool { return c.Readyz(ctx) == nil })
	}
	var alpha uuid.UUID
	for _, m := range []string{"alpha", "beta"} {
		srv, _, err := c0.Register(ctx, api.RegisterRequest{ModuleName: m, Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}}}, "")
		if err != nil {
			t.Fatal(err)
		}
		if m == "alpha" {
			alpha = srv.ServerID
		}
	}

	const outages = 3
	for i := range outages {
		// Neither heartbeats: within three intervals both are unhealthy.
		testwait.Eventually(t, "raise", func() bool { return len(hook.payloads()) >= 2*i+1 })
		if i == 0 {
			// Once the raise is recorded, the replica that sent it may die.
			testwait.Eventually(t, "the raise recorded", func() bool {
				var n int
				err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_skill_alerts`).Scan(&n)
				return err == nil && n == 1
			})
			if err := reps[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-reps[0].done
		}
		// A replica killed while it held the destination's lease (a round
		// in flight) keeps the destination from the other for up to
		// pgstore.AlertLease: the resolution may wait that long. alpha
		// heartbeats until it comes: a dispatcher that reads the skill's
		// state only after alpha fell silent again rightly sees no
		// recovery to resolve.
		limit := 10 * time.Second
		if i == 0 {
			limit += pgstore.AlertLease
		}
		var beat time.Time
		testwait.Until(t, "resolution", limit, func() bool {
			if time.Since(beat) >= 100*time.Millisecond {
				// A heartbeat that fails on a loaded machine is sent
				// again at the next poll.
				if _, err := c1.Heartbeat(ctx, alpha); err != nil {
					t.Logf("heartbeat of alpha: %v", err)
				}
				beat = time.Now()
			}
			return len(hook.payloads()) >= 2*i+2
		})
	}
	time.Sleep(500 * time.Millisecond) // a duplicate would show meanwhile
	got := hook.payloads()
	// alpha is silent again: a fourth outage may have begun.
	if len(got) < 2*outages || len(got) > 2*outages+1 {
		t.Fatalf("webhook got %d skill bodies, want %d (and perhaps the next raise): %+v", len(got), 2*outages, got)
	}
	seen := map[uuid.UUID]bool{}
	for i, p := range got {
		want := []string{"firing", "resolved"}[i%2]
		if p.Status != want || p.Skill != "search" || p.TenantID != tenant || seen[p.EventID] {
			t.Fatalf("body %d: %+v, want search %s, its id once", i, p, want)
		}
		seen[p.EventID] = true
	}
}
