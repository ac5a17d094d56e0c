package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/registry"
)

// WatchParams filters and starts GET /v1/mcp/watch; zero values are left
// out. Cursor is the position to start after (an event's ID, a list's
// watch_cursor); empty: the present.
type WatchParams struct {
	ServerID   string
	ModuleName string
	Kind       string
	Cursor     string
	// OnState, when set, is told when the stream is up (err nil) and when
	// it dropped and is being resumed (err says why), for a UI to show.
	OnState func(err error)
}

// WatchEvent is one message of the change feed: an audit event, or a
// bookmark that only moves the position on.
type WatchEvent struct {
	// ID is the position after this message: pass it as Cursor to resume.
	ID       string
	Bookmark bool
	Event    registry.Event // zero for a bookmark
}

// Limits of Watch.
const (
	// watchIdleTimeout drops a stream that sent nothing, not even a
	// bookmark (every 15 s), for this long: the connection is dead.
	watchIdleTimeout = 45 * time.Second
	watchMinBackoff  = 100 * time.Millisecond
	watchMaxBackoff  = 5 * time.Second
	// maxEventBytes bounds one message of the stream.
	maxEventBytes = 1 << 20
)

// Watch follows the tenant's change feed and calls fn with every message,
// in commit order. A dropped connection or a 5xx/429 answer is resumed by
// itself, after a backoff, from the last ID received, so fn sees every
// event once and in order. It returns nil when ctx ends, fn's error, or the
// *apiwire.Problem of a 4xx answer (400 a bad cursor, 401/403, 410 a cursor
// that expired: list again and watch from the list's watch_cursor).
func (c *Client) Watch(ctx context.Context, p WatchParams, fn func(WatchEvent) error) error {
	backoff := watchMinBackoff
	cursor := p.Cursor
	for {
		progressed, err := c.watchOnce(ctx, p, &cursor, fn)
		if ctx.Err() != nil {
			return nil
		}
		var stop *stopError
		if errors.As(err, &stop) {
			return stop.err
		}
		var prob *apiwire.Problem
		wait := backoff
		if errors.As(err, &prob) && prob.Status != http.StatusTooManyRequests && prob.Status < 500 {
			return prob
		}
		if progressed {
			backoff, wait = watchMinBackoff, watchMinBackoff
		} else {
			backoff = min(2*backoff, watchMaxBackoff)
		}
		// Full jitter keeps a fleet of watchers from reconnecting at once;
		// a Retry-After is honoured, spread by up to half of it more.
		if prob != nil && prob.RetryAfter > wait {
			wait = RetryWait(prob, wait, 0.5, 0, nil)
		} else {
			wait = wait/2 + rand.N(wait/2+1)
		}
		if p.OnState != nil {
			if err == nil {
				err = errors.New("the stream ended")
			}
			p.OnState(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// stopError carries fn's error out of a stream.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// watchOnce runs one stream from *cursor, moving it on with every message;
// progressed reports that a message arrived.
func (c *Client) watchOnce(ctx context.Context, p WatchParams, cursor *string, fn func(WatchEvent) error) (progressed bool, err error) {
	q := url.Values{}
	setNonZero(q, "server_id", p.ServerID)
	setNonZero(q, "module_name", p.ModuleName)
	setNonZero(q, "kind", p.Kind)
	u := c.base + "/v1/mcp/watch"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, &stopError{fmt.Errorf("watch: %w", err)}
	}
	req.Header.Set("Accept", apiwire.ContentTypeEventStream+", "+apiwire.ContentTypeProblem)
	if *cursor != "" {
		req.Header.Set(apiwire.HeaderLastEventID, *cursor)
	}
	token := c.token
	if c.tokens != nil {
		if token, err = c.tokens.Token(); err != nil {
			return false, &stopError{fmt.Errorf("watch: %w", err)}
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	// No overall timeout: a stream lasts; the idle timer below bounds a
	// dead one.
	hc := &http.Client{Transport: c.hc.Transport, CheckRedirect: c.hc.CheckRedirect}
	idle := time.AfterFunc(watchIdleTimeout, cancel)
	defer idle.Stop()
	resp, err := hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("watch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxDetailBytes*8))
		return false, problemFrom(resp, b)
	}
	if p.OnState != nil {
		p.OnState(nil)
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var (
		id, event string
		data      bytes.Buffer
	)
	for {
		idle.Reset(watchIdleTimeout)
		line, err := readLine(r)
		if err != nil {
			return progressed, fmt.Errorf("watch: %w", err)
		}
		if len(line) > 0 {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				event = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
			continue
		}
		// A blank line ends a message.
		if event == "" && data.Len() == 0 {
			continue
		}
		msg := WatchEvent{ID: id, Bookmark: event == apiwire.EventBookmark}
		if !msg.Bookmark {
			if err := json.Unmarshal(data.Bytes(), &msg.Event); err != nil {
				return progressed, &stopError{fmt.Errorf("watch: decode event %q: %w", event, err)}
			}
		}
		event = ""
		data.Reset()
		if id != "" {
			*cursor = id
		}
		progressed = true
		if err := fn(msg); err != nil {
			return progressed, &stopError{err}
		}
	}
}

// readLine reads one line of an event stream without its end of line,
// refusing a line longer than maxEventBytes.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return "", err
		}
		b = append(b, chunk...)
		if len(b) > maxEventBytes {
			return "", fmt.Errorf("an event stream line over %d bytes", maxEventBytes)
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

// ListSkillsParams filters and pages GET /v1/mcp/skills; zero values are
// left out.
type ListSkillsParams struct {
	Name         string
	ModuleName   string
	Available    *bool
	Protocol     string
	ServerStatus string
	Limit        int
	Cursor       string
}

func (p ListSkillsParams) query() url.Values {
	q := url.Values{}
	setNonZero(q, "name", p.Name)
	setNonZero(q, "module_name", p.ModuleName)
	setNonZero(q, "protocol", p.Protocol)
	setNonZero(q, "server_status", p.ServerStatus)
	setNonZero(q, "cursor", p.Cursor)
	if p.Available != nil {
		q.Set("available", fmt.Sprint(*p.Available))
	}
	if p.Limit != 0 {
		q.Set("limit", fmt.Sprint(p.Limit))
	}
	return q
}

// FindSkills returns one page of skills across the tenant's servers, by
// name and then module name.
func (c *Client) FindSkills(ctx context.Context, p ListSkillsParams) (apiwire.SkillDirectory, error) {
	var list apiwire.SkillDirectory
	_, err := c.do(ctx, "list skills", http.MethodGet, "/v1/mcp/skills", p.query(), nil, &list, nil)
	return list, err
}
