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

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A daemon configured with a webhook delivers the unhealthy alert of a
// silent server and its resolution after the next heartbeat.
func TestDaemonDeliversAlertsToWebhook(t *testing.T) {
	var (
		mu    sync.Mutex
		kinds []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			Kind     string `json:"kind"`
			TenantID string `json:"tenant_id"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.TenantID == "" {
			t.Errorf("webhook body %s: %v", body, err)
		}
		mu.Lock()
		kinds = append(kinds, ev.Kind)
		mu.Unlock()
	}))
	defer hook.Close()
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), kinds...)
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
	srv, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "unhealthy alert delivered", func() bool {
		k := got()
		return len(k) > 0 && k[len(k)-1] == string(registry.KindUnhealthy)
	})
	// Silent again after it, the server is unhealthy again 3I later: the
	// resolution is looked for among what came after the heartbeat.
	before := len(got())
	if _, err := c.Heartbeat(ctx, srv.ServerID); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "resolution delivered", func() bool {
		return slices.Contains(got()[before:], string(registry.KindRecovered))
	})
}
