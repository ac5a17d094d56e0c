package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a program the harness started (mcpd, etcd), with its output in
// a log file. On Linux it is killed when the harness dies (Pdeathsig).
type Process struct {
	Name string
	Log  string
	// Started is when it was started: the origin of the times of Go's
	// GODEBUG=gctrace=1 lines in its log.
	Started time.Time
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// StartProcess starts path with args, its stdout and stderr to logFile.
func StartProcess(name, path, logFile string, args []string, env []string) (*Process, error) {
	out, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(processEnv(), env...)
	cmd.SysProcAttr = sysProcAttr()
	started := time.Now()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logFile, Started: started, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return p, nil
}

// processEnv is the harness's environment without MCPD_*, ETCD_* and
// OTEL_* variables, which would change the settings behind the harness's
// back (OTEL_* would turn mcpd's tracing on).
func processEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPD_") && !strings.HasPrefix(kv, "ETCD_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to timeout for the exit, then kills.
// An exit on SIGTERM with status 0 is no error.
func (p *Process) Stop(timeout time.Duration) error {
	if p.Exited() {
		return p.exitErr()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %v after SIGTERM: killed", p.Name, timeout)
	}
}

func (p *Process) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && ee.ProcessState != nil {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	if p.err != nil {
		return fmt.Errorf("%s exited: %w (log %s)", p.Name, p.err, p.Log)
	}
	return nil
}

// LogTail is the end of the process's log.
func (p *Process) LogTail(n int) string {
	b, _ := os.ReadFile(p.Log)
	return lastBytes(string(b), n)
}

// WaitHTTP polls url until it answers 200, the process ends, or timeout.
func (p *Process) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	return p.WaitHTTPClient(ctx, &http.Client{Timeout: 2 * time.Second}, url, timeout)
}

// WaitHTTPClient is WaitHTTP through hc.
func (p *Process) WaitHTTPClient(ctx context.Context, hc *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before %s answered: %v\n%s", p.Name, url, p.exitErr(), p.LogTail(2000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s did not answer 200 within %v\n%s", p.Name, url, timeout, p.LogTail(2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Memory is a process's resident memory, from /proc/PID/status.
type Memory struct {
	// RSS is VmRSS: resident now.
	RSS int64 `json:"rss_bytes"`
	// HWM is VmHWM: the peak resident size.
	HWM int64 `json:"hwm_bytes"`
}

// ReadMemory reads VmRSS and VmHWM of pid.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return Memory{}, err
	}
	defer func() { _ = f.Close() }()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		default:
			continue
		}
		fields := strings.Fields(value) // "123456 kB"
		if len(fields) == 2 && fields[1] == "kB" {
			n, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return Memory{}, fmt.Errorf("parse %s of %d: %w", name, pid, err)
			}
			*dst = n << 10
		}
	}
	if err := sc.Err(); err != nil {
		return Memory{}, err
	}
	if m.RSS == 0 {
		return Memory{}, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}
