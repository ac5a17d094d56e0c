package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// ProfileResult names the profiles of an in-process heartbeat load.
type ProfileResult struct {
	Load LoadResult `json:"load"`
	// CPU is a CPU profile of the whole process; mcpd's goroutines carry the
	// label side=server, the load driver's side=client.
	CPU string `json:"cpu_profile"`
	// AllocsBefore and AllocsAfter are the allocation profiles before and
	// after the load: the load's own allocations are their difference
	// (go tool pprof -diff_base).
	AllocsBefore string `json:"allocs_before"`
	AllocsAfter  string `json:"allocs_after"`
}

// ProfileHeartbeats runs mcpd's daemon in this process (the same code as the
// binary: HTTP server, JWT verification, handler, registrar, group-committed
// PostgreSQL store, monitor, JSON logs into a file) against databaseURL,
// drives fleet-wide heartbeats at it from workers for d, and writes a CPU
// profile and allocation profiles into dir.
func ProfileHeartbeats(ctx context.Context, databaseURL, secretFile string, secret []byte, tenants, modules,
	workers int, d time.Duration, maxCalls int64, dir string) (ProfileResult, error) {
	var res ProfileResult
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	logFile, err := os.Create(filepath.Join(dir, "mcpd-inprocess.log"))
	if err != nil {
		return res, err
	}
	defer func() { _ = logFile.Close() }()

	port, err := FreePort()
	if err != nil {
		return res, err
	}
	cfg := config.Default()
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.DatabaseURL = databaseURL
	cfg.AuthJWTSecretFile = secretFile
	cfg.HeartbeatInterval = mcpdHeartbeatInterval
	logger := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	dmn, err := daemon.New(cfg, daemon.Options{Logger: logger})
	if err != nil {
		return res, err
	}
	// Goroutines inherit the labels of the one that starts them: the
	// daemon's (server, store batcher, pool, monitor) are side=server.
	pprof.Do(ctx, pprof.Labels("side", "server"), func(ctx context.Context) {
		err = dmn.Start(ctx)
	})
	if err != nil {
		return res, fmt.Errorf("start in-process mcpd: %w", err)
	}
	defer func() { _ = dmn.Stop(context.Background()) }()

	fleet, err := NewFleet("http://"+dmn.Addr(), secret, tenants, modules)
	if err != nil {
		return res, err
	}
	defer fleet.Close()
	// Warm up the connections and the statement caches outside the
	// profile, and make mcpd know every server (a heartbeat of each through
	// it), so that the profiled heartbeats are held ones.
	ClosedLoop(ctx, workers, 2*time.Minute, min(int64(tenants*modules), maxCalls), fleet.Heartbeat)
	ClosedLoop(ctx, workers, time.Second, maxCalls, fleet.Heartbeat)

	res.AllocsBefore = filepath.Join(dir, "allocs-before.pb.gz")
	res.AllocsAfter = filepath.Join(dir, "allocs-after.pb.gz")
	res.CPU = filepath.Join(dir, "cpu.pb.gz")
	runtime.GC()
	if err := writeProfile("allocs", res.AllocsBefore); err != nil {
		return res, err
	}
	cpu, err := os.Create(res.CPU)
	if err != nil {
		return res, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		_ = cpu.Close()
		return res, err
	}
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		res.Load = ClosedLoop(ctx, workers, d, maxCalls, fleet.Heartbeat)
	})
	pprof.StopCPUProfile()
	if err := cpu.Close(); err != nil {
		return res, err
	}
	runtime.GC() // the allocation profile is as of the last GC
	if err := writeProfile("allocs", res.AllocsAfter); err != nil {
		return res, err
	}
	return res, nil
}

// ProfileFleet runs mcpd's daemon in this process, as ProfileHeartbeats,
// with the fleet's heartbeat interval, drives the fleet load of opts at it
// (BaseURL, PID and Client are set here) and writes a CPU profile of the
// measured window only (after the connect round and a round of held
// heartbeats) into dir as cpu-fleet-<n>.pb.gz: mcpd's goroutines carry
// the label side=server, the driver's side=client. The seeded servers
// 1..opts.Conns must be parked (ParkFleet) and fresh.
func ProfileFleet(ctx context.Context, databaseURL, secretFile, dir string, opts FleetConnOptions) (string, FleetConnResult, error) {
	var res FleetConnResult
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", res, err
	}
	logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("mcpd-fleet-%d.log", opts.Conns)))
	if err != nil {
		return "", res, err
	}
	defer func() { _ = logFile.Close() }()
	port, err := FreePort()
	if err != nil {
		return "", res, err
	}
	cfg := config.Default()
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.DatabaseURL = databaseURL
	cfg.AuthJWTSecretFile = secretFile
	cfg.HeartbeatInterval = opts.Interval
	logger := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	dmn, err := daemon.New(cfg, daemon.Options{Logger: logger})
	if err != nil {
		return "", res, err
	}
	pprof.Do(ctx, pprof.Labels("side", "server"), func(ctx context.Context) {
		err = dmn.Start(ctx)
	})
	if err != nil {
		return "", res, fmt.Errorf("start in-process mcpd: %w", err)
	}
	defer func() { _ = dmn.Stop(context.Background()) }()
	path := filepath.Join(dir, fmt.Sprintf("cpu-fleet-%d.pb.gz", opts.Conns))
	f, err := os.Create(path)
	if err != nil {
		return "", res, err
	}
	var (
		profErr error
		running bool
	)
	opts.BaseURL, opts.PID, opts.Client = "http://"+dmn.Addr(), os.Getpid(), &http.Client{Timeout: 10 * time.Second}
	opts.Window = func(start bool) {
		switch {
		case start:
			profErr = pprof.StartCPUProfile(f)
			running = profErr == nil
		case running:
			pprof.StopCPUProfile()
			running = false
		}
	}
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		res, err = FleetConns(ctx, opts)
	})
	if running {
		pprof.StopCPUProfile()
	}
	if cerr := f.Close(); profErr == nil {
		profErr = cerr
	}
	if err == nil {
		err = profErr
	}
	return path, res, err
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
