package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
	// URL is its API's base URL on 127.0.0.1.
	URL string
}

// StartMCPD starts the mcpd binary at path on a free loopback port with
// args (and nothing from MCPD_* variables), logging into dir with Go's
// trace of each garbage collection (GODEBUG=gctrace=1, one line per cycle),
// and waits until /readyz answers 200.
func StartMCPD(ctx context.Context, path, dir, name string, args ...string) (*MCPD, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		argv := append([]string{"--listen", addr}, args...)
		p, err := StartProcess(name, path, filepath.Join(dir, name+".log"), argv, []string{"GODEBUG=gctrace=1"})
		if err != nil {
			return nil, err
		}
		m := &MCPD{Process: p, URL: "http://" + addr}
		if lastErr = p.WaitHTTP(ctx, m.URL+"/readyz", 30*time.Second); lastErr == nil {
			return m, nil
		}
		_ = p.Stop(5 * time.Second)
		if !strings.Contains(lastErr.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}
