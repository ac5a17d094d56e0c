package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Etcd is a one-member etcd the harness started on loopback, reached through
// its HTTP/JSON gRPC gateway (no client library needed).
type Etcd struct {
	*Process
	// URL is the client URL.
	URL     string
	Version string
	hc      *http.Client
}

// FindEtcd returns the path of etcd, or "" when it is not installed.
func FindEtcd(path string) string {
	if path != "" {
		return path
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	return ""
}

// StartEtcd starts etcd at bin with a data directory under dir and waits
// until it is healthy.
func StartEtcd(ctx context.Context, bin, dir string) (*Etcd, error) {
	version := ""
	if out, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil {
		version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
		version = strings.TrimPrefix(version, "etcd Version: ")
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		cport, err := FreePort()
		if err != nil {
			return nil, err
		}
		pport, err := FreePort()
		if err != nil {
			return nil, err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(cport)
		peer := "http://127.0.0.1:" + strconv.Itoa(pport)
		data := filepath.Join(dir, "etcd-data-"+strconv.Itoa(attempt))
		if err := os.MkdirAll(data, 0o700); err != nil {
			return nil, err
		}
		args := []string{"--name", "bench", "--data-dir", data,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "bench=" + peer, "--logger", "zap", "--log-outputs", "stderr"}
		p, err := StartProcess("etcd", bin, filepath.Join(dir, "etcd.log"), args, nil)
		if err != nil {
			return nil, err
		}
		e := &Etcd{Process: p, URL: client, Version: version,
			hc: &http.Client{Transport: NewTransport(), Timeout: 30 * time.Second}}
		if lastErr = p.WaitHTTP(ctx, client+"/health", 30*time.Second); lastErr == nil {
			return e, nil
		}
		_ = p.Stop(5 * time.Second)
	}
	return nil, lastErr
}

// post sends a JSON body to the gateway and decodes the answer into out.
func (e *Etcd) post(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, out)
}

// GrantLeases grants n leases of ttl, with workers calls at once, and
// returns their ids.
func (e *Etcd) GrantLeases(ctx context.Context, n, workers int, ttl time.Duration) ([]string, error) {
	ids := make([]string, n)
	var (
		mu       sync.Mutex
		firstErr error
	)
	res := ClosedLoop(ctx, workers, 2*time.Minute, int64(n), func(ctx context.Context, seq int64) error {
		var out struct {
			ID    string `json:"ID"`
			Error string `json:"error"`
		}
		if err := e.post(ctx, "/v3/lease/grant", map[string]any{"TTL": int64(ttl.Seconds())}, &out); err != nil {
			return err
		}
		if out.ID == "" {
			return fmt.Errorf("lease grant: no ID (%s)", out.Error)
		}
		mu.Lock()
		ids[seq] = out.ID
		mu.Unlock()
		return nil
	})
	if res.Errors > 0 {
		firstErr = errors.New(res.FirstError)
	}
	if firstErr == nil && res.Calls < int64(n) {
		firstErr = fmt.Errorf("granted %d leases of %d in time", res.Calls, n)
	}
	return ids, firstErr
}

// KeepAlive renews lease id once: POST /v3/lease/keepalive with one message
// (the gateway's form of the client's KeepAliveOnce).
func (e *Etcd) KeepAlive(ctx context.Context, id string) error {
	var out struct {
		Result struct {
			ID  string `json:"ID"`
			TTL string `json:"TTL"`
		} `json:"result"`
		Error any `json:"error"`
	}
	if err := e.post(ctx, "/v3/lease/keepalive", map[string]string{"ID": id}, &out); err != nil {
		return err
	}
	if out.Error != nil {
		return fmt.Errorf("lease keepalive: %v", out.Error)
	}
	if ttl, _ := strconv.Atoi(out.Result.TTL); ttl <= 0 {
		return fmt.Errorf("lease keepalive of %s: TTL %q (lease not found)", id, out.Result.TTL)
	}
	return nil
}
