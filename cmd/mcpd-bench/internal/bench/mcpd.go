package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BuildMCPD builds cmd/mcpd of the module the harness runs in into dir and
// returns the binary's path.
func BuildMCPD(ctx context.Context, goTool, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, goTool, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the mcpd module: run the harness from the repository (make bench), or give -mcpd")
	}
	bin := filepath.Join(dir, "mcpd")
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-o", bin, "./cmd/mcpd")
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mcpd: %w\n%s", err, b)
	}
	return bin, nil
}

// WriteSecret writes a fresh HS256 secret (64 hex characters) into a 0600
// file in dir and returns the path and the secret.
func WriteSecret(dir string) (string, []byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	secret := []byte(hex.EncodeToString(b))
	path := filepath.Join(dir, "jwt-secret")
	if err := os.WriteFile(path, append(secret, '\n'), 0o600); err != nil {
		return "", nil, err
	}
	return path, secret, nil
}

// MCPD is a running mcpd binary.
type MCPD struct {
	*Process
	// URL is its API's base URL on 127.0.0.1 (https:// when it serves TLS).
	URL string
	// Client reaches URL (trusting its certificate when it serves TLS).
	Client *http.Client

	spec MCPDSpec
	addr string
}

// MCPDSpec is how to start an mcpd binary.
type MCPDSpec struct {
	// Path is the binary; Dir where its log goes (Name.log).
	Path, Dir, Name string
	// Args are its arguments but --listen, which the harness chooses.
	Args []string
	// TLS, when set, is the client configuration that reaches an mcpd
	// serving TLS (Args give it --tls-cert-file and --tls-key-file).
	TLS *tls.Config
	// Env are more variables of its environment (OTEL_*, say).
	Env []string
}

// StartMCPD starts the mcpd binary at path on a free loopback port with
// args (and nothing from MCPD_* variables), logging into dir with Go's
// trace of each garbage collection (GODEBUG=gctrace=1, one line per cycle),
// and waits until /readyz answers 200.
func StartMCPD(ctx context.Context, path, dir, name string, args ...string) (*MCPD, error) {
	return StartMCPDSpec(ctx, MCPDSpec{Path: path, Dir: dir, Name: name, Args: args})
}

// StartMCPDSpec starts the mcpd of spec on a free loopback port, with
// GODEBUG=gctrace=1 as StartMCPD, and waits until /readyz answers 200.
func StartMCPDSpec(ctx context.Context, spec MCPDSpec) (*MCPD, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		m, err := startMCPDAt(ctx, spec, "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			return m, nil
		}
		if lastErr = err; !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func startMCPDAt(ctx context.Context, spec MCPDSpec, addr string) (*MCPD, error) {
	argv := append([]string{"--listen", addr}, spec.Args...)
	env := append([]string{"GODEBUG=gctrace=1"}, spec.Env...)
	p, err := StartProcess(spec.Name, spec.Path, filepath.Join(spec.Dir, spec.Name+".log"), argv, env)
	if err != nil {
		return nil, err
	}
	m := &MCPD{Process: p, URL: "http://" + addr, Client: &http.Client{Timeout: 10 * time.Second}, spec: spec, addr: addr}
	if spec.TLS != nil {
		m.URL = "https://" + addr
		m.Client.Transport = &http.Transport{TLSClientConfig: spec.TLS.Clone()}
	}
	if err := p.WaitHTTPClient(ctx, m.Client, m.URL+"/readyz", 30*time.Second); err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, err
	}
	return m, nil
}

// Restart stops mcpd (SIGTERM, waiting up to timeout) and starts it again
// with the same arguments on the same address, logging into
// Name-restart.log, and waits until /readyz answers 200.
func (m *MCPD) Restart(ctx context.Context, timeout time.Duration) error {
	if err := m.Stop(timeout); err != nil {
		return err
	}
	spec := m.spec
	spec.Name += "-restart"
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		var next *MCPD
		if next, err = startMCPDAt(ctx, spec, m.addr); err == nil {
			m.Process = next.Process
			return nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
