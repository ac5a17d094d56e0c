package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A daemon configured with a webhook raises MCPSkillUnavailable when both
// servers offering a skill fall silent, and resolves it when a new module
// registers the skill.
func TestDaemonSkillOutage(t *testing.T) {
	var (
		mu       sync.Mutex
		statuses []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			AlertName string `json:"alertname"`
			Skill     string `json:"skill"`
			Status    string `json:"status"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		if p.AlertName == "MCPSkillUnavailable" {
			mu.Lock()
			statuses = append(statuses, p.Skill+" "+p.Status)
			mu.Unlock()
		}
	}))
	defer hook.Close()
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), statuses...)
	}

	cfg := devConfig()
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.MonitorPeriod = 50 * time.Millisecond
	cfg.AlertWebhookURL = hook.URL
	var stdout testlog.Buffer
	d := start(t, cfg, daemon.Options{Stdout: &stdout})
	c := client.New("http://"+d.Addr(), tokenRE.FindStringSubmatch(stdout.String())[1])
	defer c.CloseIdleConnections()
	ctx := context.Background()
	register := func(module string) uuid.UUID {
		t.Helper()
		srv, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: module, Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}}}, "")
		if err != nil {
			t.Fatal(err)
		}
		return srv.ServerID
	}
	register("alpha")
	register("beta")
	testwait.Eventually(t, "skill outage raised", func() bool {
		k := got()
		return len(k) >= 1 && k[0] == "search firing"
	})
	// gamma heartbeats while the test waits: a dispatcher round that came
	// 3I after its registration would find it unhealthy, the skill still
	// out.
	gamma := register("gamma")
	testwait.Eventually(t, "skill outage resolved", func() bool {
		if _, err := c.Heartbeat(ctx, gamma); err != nil {
			t.Fatal(err)
		}
		k := got()
		return len(k) >= 2 && slices.Contains(k[1:], "search resolved")
	})
}
