package mcpinspect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// stderrTailBytes is how much of a command's standard error is kept to
// quote when it fails.
const stderrTailBytes = 4 << 10

// process is a stdio server this package started: its pipes, and when and
// how it ended.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of its standard input
	stdout *os.File // our end of its standard output
	tail   *tailBuffer

	exited  chan struct{}
	waitErr error // set before exited is closed

	closeOnce sync.Once
	grace     time.Duration
}

// startProcess starts t's command with pipes of its own for stdin and
// stdout (so that waiting for it never closes what the SDK still reads),
// in a process group of its own where the system has them (so that
// stopping it stops what it started).
func startProcess(t Target, grace time.Duration) (*process, error) {
	cmd := exec.Command(t.Command[0], t.Command[1:]...)
	if len(t.Env) > 0 {
		cmd.Env = append(os.Environ(), t.Env...)
	}
	cmd.Dir = t.Dir
	setProcessGroup(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", t.Command[0], err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("start %s: %w", t.Command[0], err)
	}
	p := &process{cmd: cmd, stdin: inW, stdout: outR, tail: &tailBuffer{max: stderrTailBytes},
		exited: make(chan struct{}), grace: grace}
	cmd.Stdin, cmd.Stdout = inR, outW
	if t.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.tail, t.Stderr)
	} else {
		cmd.Stderr = p.tail
	}
	// A grandchild that keeps stderr open must not hold Wait for ever.
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	// Our copies of the child's ends: closing them lets us see EOF when it
	// exits.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", t.Command[0], err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Read and Write make the process the SDK's io.ReadWriteCloser.
func (p *process) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close stops the process as the MCP spec says a client should: close its
// input, wait, SIGTERM, wait, SIGKILL. Each wait is the grace period.
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		p.stdin.Close()
		if !p.wait(p.grace) {
			signalGroup(p.cmd, termSignal)
			if !p.wait(p.grace) {
				signalGroup(p.cmd, os.Kill)
				p.wait(p.grace)
			}
		}
		p.stdout.Close()
	})
	return nil
}

func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// exitError describes how the process ended, with the end of its stderr;
// nil while it runs.
func (p *process) exitError() error {
	select {
	case <-p.exited:
	default:
		return nil
	}
	err := p.waitErr
	if err == nil {
		err = errors.New("exited with status 0")
	}
	if tail := p.tail.String(); tail != "" {
		return fmt.Errorf("%s: %w; its stderr ends: %s", p.cmd.Args[0], err, tail)
	}
	return fmt.Errorf("%s: %w", p.cmd.Args[0], err)
}

// stderrTail is the end of the process's stderr, on one line.
func (p *process) stderrTail() string { return p.tail.String() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns the kept bytes trimmed, newlines shown as " | ".
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
