package mcpserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// The official TypeScript SDK the test drives, pinned.
const (
	tsSDKPackage = "@modelcontextprotocol/sdk"
	tsSDKVersion = "1.32.2"
)

// tsLine is one line the Node client prints.
type tsLine struct {
	Ready          bool                `json:"ready"`
	Unauthorized   bool                `json:"unauthorized"`
	Server         map[string]any      `json:"server"`
	Providers      []mcpserve.Provider `json:"providers"`
	Text           string              `json:"text"`
	ProvidersB     []mcpserve.Provider `json:"providersB"`
	UnknownIsError bool                `json:"unknownIsError"`
	Updated        string              `json:"updated"`
	Client         string              `json:"client"`
	Read           *mcpserve.Providers `json:"read"`
	Updates        map[string]int      `json:"updates"`
}

// TestTypeScriptClient drives a client built with the official TypeScript
// SDK (which speaks 2025-11-25): no token refused, find_skill, a tool
// error, a subscription told of a death and a recovery, the read after it
// current, and another tenant's subscriber told nothing.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, sdkDir := mcptest.NpmPackage(t, tsSDKPackage, tsSDKVersion)
	script, err := filepath.Abs(filepath.Join("testdata", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t)
	tenantA, tenantB := uuid.New(), uuid.New()
	srv := e.register(t, tenantA, "search-a", "search")
	e.register(t, tenantA, "search-b", "search")
	e.register(t, tenantB, "other", "other")
	// search-b dies; search-a lives.
	e.clock.Advance(2 * testInterval)
	e.heartbeat(t, tenantA, srv.ServerID)
	e.sweep(t, testInterval+time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "MCPD_SDK_DIR="+sdkDir, "MCPD_URL="+e.url,
		"MCPD_TOKEN="+e.token(t, tenantA, "mcp:read"), "MCPD_TOKEN_B="+e.token(t, tenantB, "mcp:read"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var (
		mu    sync.Mutex
		lines []tsLine
	)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l tsLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("node printed %q: %v", sc.Text(), err)
				continue
			}
			mu.Lock()
			lines = append(lines, l)
			mu.Unlock()
		}
	}()
	await := func(what string, match func(tsLine) bool) tsLine {
		t.Helper()
		var found tsLine
		testwait.Until(t, what, time.Minute, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range lines {
				if match(l) {
					found = l
					return true
				}
			}
			return false
		})
		return found
	}
	updates := func(client string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if l.Updated != "" && l.Client == client {
				n++
			}
		}
		return n
	}

	ready := await("the client's start", func(l tsLine) bool { return l.Ready })
	if !ready.Unauthorized {
		t.Error("the client connected without a token")
	}
	if ready.Server["name"] != "mcpd" {
		t.Errorf("server %v", ready.Server)
	}
	if len(ready.Providers) != 1 || ready.Providers[0].ModuleName != "search-a" || ready.Providers[0].Status != "healthy" ||
		!hasRemote(ready.Providers[0]) {
		t.Errorf("find_skill(search): %+v", ready.Providers)
	}
	if ready.Text == "" {
		t.Error("find_skill: no text")
	}
	if len(ready.ProvidersB) != 0 {
		t.Errorf("tenant B's find_skill(search): %+v", ready.ProvidersB)
	}
	if !ready.UnknownIsError {
		t.Error("get_server of an unknown module: not a tool error")
	}
	if t.Failed() {
		return
	}
	testwait.Eventually(t, "both subscriptions", func() bool {
		return e.mcp.Subscribed(tenantA) >= 1 && e.mcp.Subscribed(tenantB) >= 1
	})

	// search-a dies.
	e.sweep(t, 3*testInterval)
	await("the update after the death", func(l tsLine) bool { return l.Updated == mcpserve.SkillURI("search") })
	// It recovers; the notification follows once the second passed.
	e.heartbeat(t, tenantA, srv.ServerID)
	e.clock.Advance(time.Second)
	testwait.Eventually(t, "the update after the recovery", func() bool { return updates("a") >= 2 })
	fmt.Fprintln(stdin, "read")
	read := await("the read", func(l tsLine) bool { return l.Read != nil })
	if len(read.Read.Providers) != 1 || read.Read.Providers[0].Status != "healthy" {
		t.Errorf("read after the recovery: %+v", read.Read)
	}
	fmt.Fprintln(stdin, "exit")
	end := await("the client's end", func(l tsLine) bool { return l.Updates != nil })
	if end.Updates["a"] != 2 || end.Updates["b"] != 0 {
		t.Errorf("updates %v, want a: 2 (death, recovery), b: 0", end.Updates)
	}
}

// testWriter logs what it is written.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("node: %s", p)
	return len(p), nil
}

var _ io.Writer = testWriter{}
