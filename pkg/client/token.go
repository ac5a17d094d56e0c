package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenSource gives the bearer token of each call.
type TokenSource interface {
	Token() (string, error)
}

// WithTokenSource returns a copy of c, sharing its connections, that asks
// ts for the bearer token of each call instead of sending a fixed one.
func (c *Client) WithTokenSource(ts TokenSource) *Client {
	cp := *c
	cp.tokens = ts
	return &cp
}

// maxTokenFileBytes bounds a token file.
const maxTokenFileBytes = 64 << 10

// TokenFile is a TokenSource that reads a file holding the token (white
// space around it ignored) and reads it again whenever the file changes:
// its size, modification time or inode (a rename over it), looked at
// before each call. Short-lived tokens written there by another process
// are picked up without a restart. It is safe for concurrent use.
type TokenFile struct {
	path string

	mu    sync.Mutex
	token string
	size  int64
	mtime time.Time
	info  os.FileInfo
}

// NewTokenFile returns the source of the token in the file at path.
func NewTokenFile(path string) *TokenFile { return &TokenFile{path: path} }

// Token returns the file's token, read again when the file has changed.
func (f *TokenFile) Token() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if f.info != nil && os.SameFile(fi, f.info) && fi.Size() == f.size && fi.ModTime().Equal(f.mtime) {
		return f.token, nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", f.path, err)
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("token file %s: larger than %d bytes", f.path, maxTokenFileBytes)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("token file %s: %w", f.path, errEmptyToken)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("token file %s: white space inside the token", f.path)
	}
	f.token, f.info, f.size, f.mtime = tok, fi, fi.Size(), fi.ModTime()
	return tok, nil
}

// errEmptyToken: a token file holds nothing but white space.
var errEmptyToken = errors.New("empty")
