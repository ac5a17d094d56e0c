package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// The test binary runs main when this variable is set, so that the tests
// see the real exit codes and signal handling of the command.
const envRunMain = "MCPCTL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func command(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{envRunMain + "=1", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	return cmd
}

func runMain(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := command(t, env, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	if code, out, _ := runMain(t, nil, "version"); code != 0 || !strings.HasPrefix(out, "mcpctl ") {
		t.Fatalf("version: exit %d stdout %q", code, out)
	}
	if code, _, errOut := runMain(t, nil, "heartbeat", "Not_A_UUID"); code != 2 || !strings.Contains(errOut, "invalid SERVER_ID") {
		t.Fatalf("bad SERVER_ID: exit %d stderr %q", code, errOut)
	}
	// Nothing listens on port 1 of loopback: the call fails.
	if code, _, errOut := runMain(t, []string{"MCPCTL_SERVER=http://127.0.0.1:1"}, "list"); code != 1 || !strings.HasPrefix(errOut, "Error: ") {
		t.Fatalf("unreachable server: exit %d stderr %q", code, errOut)
	}
}

func TestInterruptStopsSimulation(t *testing.T) {
	t.Parallel()
	store := memstore.New(nil)
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, HeartbeatInterval: 10 * time.Second})
	secret := []byte(strings.Repeat("k", 8) + uuid.NewString())
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier}))
	defer srv.Close()
	token, err := auth.Issue(secret, uuid.New(), "test", "mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	cmd := command(t, []string{"MCPCTL_SERVER=" + srv.URL, "MCPCTL_TOKEN=" + token},
		"heartbeat-simulate", "--servers", "2", "--duration", "1m", "--interval", "50ms")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once both servers are registered.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !testwait.Wait(20*time.Second, func() bool {
		page, err := store.CountByStatus(ctx)
		return err == nil && page[registry.StatusHealthy] == 2
	}) {
		_ = cmd.Process.Kill()
		t.Fatal("the simulation did not register its servers")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("mcpctl did not stop on SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(errOut.String(), "Error: interrupted") {
		t.Fatalf("after SIGINT: exit %d stderr %q", code, errOut.String())
	}
	if !strings.Contains(out.String(), "servers") {
		t.Fatalf("no summary of the interrupted run on stdout: %q", out.String())
	}
}
