package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/registry"
)

// DefaultStreamWriteTimeout bounds each write of a watch stream: a client
// that does not read for that long is disconnected (it resumes from its
// last id and loses nothing), so no stream is buffered without bound.
const DefaultStreamWriteTimeout = 10 * time.Second

// watch streams the tenant's audit events as Server-Sent Events: from after
// the Last-Event-ID header's position, else the cursor's, else the present.
// Everything that can fail is checked before the 200 and its headers are
// flushed; from then on every event that commits reaches the client.
func (h *handler) watch(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	if h.feed == nil {
		writeProblem(w, r, unavailableProblem("this mcpd serves no change feed"))
		return
	}
	q := r.URL.Query()
	f, p := parseEventFilter(q)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	start, field := r.Header.Get(HeaderLastEventID), HeaderLastEventID
	if start == "" {
		start, field = q.Get("cursor"), "cursor"
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	from, err := h.watchStart(ctx, claims.TenantID, start)
	cancel()
	if errors.Is(err, errBadCursor) {
		writeProblem(w, r, validationProblem(field, "is not a position of this tenant's trail"))
		return
	}
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	release, ok := h.acquireWatch(w, r, claims.TenantID)
	if !ok {
		return // 429, written
	}
	defer release()

	hdr := w.Header()
	hdr.Set("Content-Type", ContentTypeEventStream)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	cc, _ := h.codec(r.Context()) // read by watchStart
	sink := &sseSink{w: w, rc: http.NewResponseController(w), cursors: cc, tenant: claims.TenantID,
		timeout: h.streamWriteTimeout, frames: &h.frames}
	if err := sink.flush(); err != nil {
		return
	}
	h.metrics.watchers.Inc()
	defer h.metrics.watchers.Dec()
	if span := h.recording(r); span != nil {
		span.AddEvent("watch stream started", trace.WithAttributes(attrTenant.String(claims.TenantID.String())))
		defer func() {
			span.AddEvent("watch stream ended", trace.WithAttributes(
				attribute.Int("mcpd.watch.events_sent", sink.sent), attribute.Bool("mcpd.watch.cut_off", sink.writeErr != nil)))
		}()
	}

	streamCtx, stop := context.WithCancel(r.Context())
	defer stop()
	defer context.AfterFunc(h.streams, stop)()
	// The stream ends with its token: the client resumes from its last id
	// with a fresh one.
	if !claims.ExpiresAt.IsZero() {
		expiry := h.tokenClock.AfterFunc(claims.ExpiresAt.Sub(h.tokenClock.Now()), stop)
		defer expiry.Stop()
	}
	err = h.feed.Follow(streamCtx, claims.TenantID, f, from, sink)
	switch {
	case sink.writeErr != nil:
		// A client that did not read in time, or went away mid-write.
		h.logger.InfoContext(r.Context(), "watch stream cut off", "tenant_id", claims.TenantID.String(), "err", sink.writeErr)
		h.metrics.watchCutoffs.Inc()
	case err == nil, errors.Is(err, feed.ErrReset):
	default:
		h.logger.WarnContext(r.Context(), "watch stream ended", "tenant_id", claims.TenantID.String(), "err", err)
	}
}

// watchStart returns the position a watch starts after.
func (h *handler) watchStart(ctx context.Context, tenant uuid.UUID, cursor string) (registry.Position, error) {
	cc, err := h.codec(ctx)
	if err != nil {
		return registry.Position{}, err
	}
	if cursor == "" {
		return h.feed.Horizon(ctx, tenant)
	}
	return h.checkCursor(ctx, cc, tenant, cursor)
}

// sseSink writes a watch's events and bookmarks to its client.
type sseSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	cursors *cursorCodec
	tenant  uuid.UUID
	timeout time.Duration
	frames  *frameCache
	buf     []byte
	// writeErr is the failed write that ended the stream, if any.
	writeErr error
	// sent counts the events written.
	sent int
}

func (s *sseSink) Events(events []registry.Event) error {
	s.buf = s.buf[:0]
	for _, ev := range events {
		if f := s.frames.get(ev.EventID); f != nil {
			s.buf = append(s.buf, f...)
			continue
		}
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		start := len(s.buf)
		s.buf = s.frame(s.buf, ev.Position, string(ev.Kind), data)
		s.frames.put(ev.EventID, s.buf[start:])
	}
	s.sent += len(events)
	return s.write()
}

// frameCache keeps the frames of recent events, so that an event that
// reaches many watchers of its tenant is encoded and sealed once, not once
// per watcher. An event belongs to one tenant, so its frame, id included,
// is the same for every watcher that is sent it.
type frameCache struct {
	mu     sync.Mutex
	frames map[uuid.UUID][]byte
}

// maxCachedFrames bounds the cache; when full it starts again.
const maxCachedFrames = 8192

func (c *frameCache) get(id uuid.UUID) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames[id]
}

func (c *frameCache) put(id uuid.UUID, frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frames == nil || len(c.frames) >= maxCachedFrames {
		c.frames = make(map[uuid.UUID][]byte, 256)
	}
	c.frames[id] = slices.Clone(frame)
}

func (s *sseSink) Bookmark(pos registry.Position) error {
	s.buf = s.frame(s.buf[:0], pos, EventBookmark, []byte("{}"))
	return s.write()
}

func (s *sseSink) frame(b []byte, pos registry.Position, event string, data []byte) []byte {
	b = append(b, "id: "...)
	b = append(b, s.cursors.encodePosition(s.tenant, pos)...)
	b = append(b, "\nevent: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

func (s *sseSink) write() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		s.writeErr = err
		return err
	}
	_, err := s.w.Write(s.buf)
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil {
		s.writeErr = err
	}
	return err
}

func (s *sseSink) flush() error {
	err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil {
		s.writeErr = err
	}
	return err
}
