package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// The net/http anchor answers the fleet driver's heartbeats as mcpd
// does (200, a healthy status), one connection per server, on schedule.
func TestFleetConnsAgainstTheAnchor(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeAnchor(ctx, addr) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	res, err := FleetConns(context.Background(), FleetConnOptions{BaseURL: "http://" + addr, PID: os.Getpid(),
		Secret: []byte("0123456789abcdef0123456789abcdef"), Conns: 20, Modules: 7,
		Interval: 100 * time.Millisecond, Jitter: 0.05, Duration: 300 * time.Millisecond, MaxCalls: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Connected != 20 || res.Load.Errors != 0 || res.Connects != 0 {
		t.Fatalf("connected %d, errors %d (%s), reconnects %d; want 20, none, none", res.Connected, res.Load.Errors,
			res.Load.FirstError, res.Connects)
	}
	if res.Load.Calls < 40 || res.Load.Calls > 80 {
		t.Fatalf("%d heartbeats measured, want about 60", res.Load.Calls)
	}
}
