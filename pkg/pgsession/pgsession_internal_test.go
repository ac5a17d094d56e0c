package pgsession

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// A server that accepts a connection and then never answers (a host
// frozen after the handshake) fails the session settings in their time,
// instead of holding the new connection, which a pool opens in the
// background with no deadline of its own, forever.
func TestAfterConnectBoundedWhenTheServerHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		be := pgproto3.NewBackend(c, c)
		if _, err := be.ReceiveStartupMessage(); err != nil {
			return
		}
		be.Send(&pgproto3.AuthenticationOk{})
		be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		if err := be.Flush(); err != nil {
			return
		}
		_, _ = be.Receive() // the settings' statement, never answered
		<-release
	}()

	cfg, err := pgx.ParseConfig("postgres://mcpd@" + ln.Addr().String() + "/mcpd?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	bound := settingsTimeout
	settingsTimeout = 50 * time.Millisecond
	t.Cleanup(func() { settingsTimeout = bound })
	done := make(chan error, 1)
	go func() { done <- AfterConnect(nil)(context.Background(), conn) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("AfterConnect on a server that never answered: no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AfterConnect on a server that never answers still waits after 10 s; its settings' timeout is 50 ms")
	}
}
