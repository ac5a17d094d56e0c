package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Resource URIs and templates.
const (
	SkillURIPrefix  = "mcpd://skills/"
	ServerURIPrefix = "mcpd://servers/"
	SkillTemplate   = SkillURIPrefix + "{name}"
	ServerTemplate  = ServerURIPrefix + "{module_name}"
	mimeJSON        = "application/json"
)

// SkillURI is the resource of a skill's providers.
func SkillURI(name string) string { return SkillURIPrefix + url.PathEscape(name) }

// ServerURI is the resource of one server.
func ServerURI(module string) string { return ServerURIPrefix + module }

// tenant is one tenant's MCP server, its HTTP handlers and what keeps its
// subscribers told.
type tenant struct {
	id     uuid.UUID
	reader Reader
	logger *slog.Logger
	clock  clockwork.Clock
	every  time.Duration // at most one notification per resource per every
	// timeout bounds the reads of one call.
	timeout time.Duration

	server    *mcp.Server
	stateful  *mcp.StreamableHTTPHandler
	stateless *mcp.StreamableHTTPHandler

	// inflight counts the requests being served; guarded by Handler.mu.
	inflight int
	// stop ends the follower.
	stop context.CancelFunc
	// subscribed counts the subscriptions accepted; followed the events
	// read from the feed (tests).
	subscribed, followed atomic.Int64

	// smu guards the bounds of sessions: subs holds each session's
	// subscribed URIs, owners the subject of each session id, opening and
	// openingBy the sessions being opened (of the tenant, of each subject).
	smu       sync.Mutex
	subs      map[*mcp.ServerSession]map[string]struct{}
	owners    map[string]string
	opening   int
	openingBy map[string]int

	mu sync.Mutex
	// modules holds the skill names of each module, as last read.
	modules map[string][]string
	// names counts the modules that offer each skill name: the listed
	// skill resources.
	names map[string]int
	// last is when each resource was last notified; pending the resources
	// changed since, waiting for their second to pass.
	last    map[string]time.Time
	pending map[string]bool
	timer   clockwork.Timer
}

// follow keeps t's resources and subscribers current from the feed, after
// from, until ctx ends or the feed's history changed (then it starts
// again from the present, re-reading what it knows).
func (t *tenant) follow(ctx context.Context, hub *feed.Hub, from registry.Position, evict func() bool) {
	for {
		err := hub.Follow(ctx, t.id, registry.EventFilter{}, from, &tenantSink{t: t, ctx: ctx, evict: evict})
		if ctx.Err() != nil || errors.Is(err, errEvicted) {
			return
		}
		if err != nil && !errors.Is(err, feed.ErrReset) {
			t.logger.WarnContext(ctx, "mcp: follow the feed", "tenant_id", t.id.String(), "err", err)
		}
		// Start again from the present: everything may have changed.
		for {
			p, herr := hub.Horizon(ctx, t.id)
			if herr == nil {
				from = p
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-t.clock.After(time.Second):
			}
		}
		t.reload(ctx)
	}
}

var errEvicted = errors.New("tenant evicted")

// tenantSink turns a tenant's events into notifications.
type tenantSink struct {
	t     *tenant
	ctx   context.Context
	evict func() bool
}

func (s *tenantSink) Events(events []registry.Event) error {
	defer s.t.followed.Add(int64(len(events)))
	seen := make(map[string]bool, len(events))
	for i := range events {
		m := events[i].ModuleName
		if seen[m] {
			continue
		}
		seen[m] = true
		s.t.moduleChanged(s.ctx, m)
	}
	if s.evict() {
		return errEvicted
	}
	return nil
}

func (s *tenantSink) Bookmark(registry.Position) error {
	s.t.pruneSubscriptions()
	if s.evict() {
		return errEvicted
	}
	return nil
}

// load reads every skill name of the tenant: the listed skill resources.
func (t *tenant) load(ctx context.Context) error {
	modules := make(map[string][]string)
	f := registry.SkillFilter{Limit: registry.MaxPageLimit}
	for {
		page, err := t.reader.FindSkills(ctx, t.id, f)
		if err != nil {
			return err
		}
		for _, sk := range page.Skills {
			modules[sk.ModuleName] = append(modules[sk.ModuleName], sk.Name)
		}
		if page.Next == nil {
			break
		}
		f.After = page.Next
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.modules = make(map[string][]string)
	old := t.names
	t.names = make(map[string]int)
	for m, names := range modules {
		t.setModuleLocked(m, names)
	}
	t.syncResourcesLocked(old)
	return nil
}

// reload reads everything again after the feed's history changed and
// tells every subscriber of every resource.
func (t *tenant) reload(ctx context.Context) {
	if err := t.load(ctx); err != nil {
		t.logger.WarnContext(ctx, "mcp: read the skills", "tenant_id", t.id.String(), "err", err)
	}
	t.mu.Lock()
	uris := make([]string, 0, len(t.names)+len(t.modules))
	for n := range t.names {
		uris = append(uris, SkillURI(n))
	}
	for m := range t.modules {
		uris = append(uris, ServerURI(m))
	}
	t.mu.Unlock()
	t.changed(uris...)
}

// moduleChanged reads a module's skills again after one of its events and
// notifies the resources that may have changed: the server's, and those of
// every skill it offered before or offers now.
func (t *tenant) moduleChanged(ctx context.Context, module string) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var names []string
	f := registry.SkillFilter{ModuleName: module, Limit: registry.MaxPageLimit}
	for range maxPages {
		page, err := t.reader.FindSkills(ctx, t.id, f)
		if err != nil {
			if ctx.Err() == nil {
				t.logger.WarnContext(ctx, "mcp: read a module's skills", "tenant_id", t.id.String(),
					"module_name", module, "err", err)
			}
			names = nil
			break
		}
		for _, sk := range page.Skills {
			names = append(names, sk.Name)
		}
		if page.Next == nil {
			break
		}
		f.After = page.Next
	}
	t.mu.Lock()
	before := t.modules[module]
	old := make(map[string]int, len(t.names))
	for n, c := range t.names {
		old[n] = c
	}
	t.setModuleLocked(module, names)
	t.syncResourcesLocked(old)
	t.mu.Unlock()

	uris := []string{ServerURI(module)}
	seen := make(map[string]bool, len(before)+len(names))
	for _, n := range append(before, names...) {
		if !seen[n] {
			seen[n] = true
			uris = append(uris, SkillURI(n))
		}
	}
	t.changed(uris...)
}

// setModuleLocked records a module's skill names; t.mu is held.
func (t *tenant) setModuleLocked(module string, names []string) {
	for _, n := range t.modules[module] {
		if t.names[n]--; t.names[n] <= 0 {
			delete(t.names, n)
		}
	}
	if len(names) == 0 {
		delete(t.modules, module)
		return
	}
	t.modules[module] = names
	for _, n := range names {
		t.names[n]++
	}
}

// syncResourcesLocked lists the skill resources that appeared since old
// and unlists those that went: the SDK tells list subscribers
// (notifications/resources/list_changed). t.mu is held.
func (t *tenant) syncResourcesLocked(old map[string]int) {
	var gone []string
	for n := range old {
		if t.names[n] == 0 {
			gone = append(gone, SkillURI(n))
		}
	}
	if len(gone) > 0 {
		t.server.RemoveResources(gone...)
	}
	for n := range t.names {
		if old[n] == 0 {
			t.server.AddResource(&mcp.Resource{
				URI: SkillURI(n), Name: "skill " + n, MIMEType: mimeJSON,
				Description: "The live providers of skill " + n + ", healthy first.",
			}, t.readSkill)
		}
	}
}

// changed notifies each resource's subscribers now, or, for a resource
// notified less than a second ago, once that second has passed: at most one
// notification per resource per second, the last one after the last change.
func (t *tenant) changed(uris ...string) {
	now := t.clock.Now()
	var send []string
	t.mu.Lock()
	for _, u := range uris {
		if last, ok := t.last[u]; ok && now.Sub(last) < t.every {
			t.pending[u] = true
			continue
		}
		t.last[u] = now
		delete(t.pending, u)
		send = append(send, u)
	}
	t.armLocked()
	t.mu.Unlock()
	t.notify(send)
}

// armLocked starts the timer for the earliest pending resource; t.mu is
// held. Its delay is from the clock's time now, not from the time its
// caller read: a timer starts from the time it is made at, and a clock
// that moved in between (a test's fake clock advanced by another
// goroutine) would have it fire that much later.
func (t *tenant) armLocked() {
	if t.timer != nil || len(t.pending) == 0 {
		return
	}
	var due time.Time
	for u := range t.pending {
		if d := t.last[u].Add(t.every); due.IsZero() || d.Before(due) {
			due = d
		}
	}
	t.timer = t.clock.AfterFunc(max(due.Sub(t.clock.Now()), 0), t.flush)
}

// flush sends the pending notifications whose second has passed.
func (t *tenant) flush() {
	now := t.clock.Now()
	var send []string
	t.mu.Lock()
	t.timer = nil
	for u := range t.pending {
		if now.Sub(t.last[u]) >= t.every {
			t.last[u] = now
			delete(t.pending, u)
			send = append(send, u)
		}
	}
	// Forget what was sent long ago: its next change is sent at once anyway.
	for u, last := range t.last {
		if now.Sub(last) > 10*t.every && !t.pending[u] {
			delete(t.last, u)
		}
	}
	t.armLocked()
	t.mu.Unlock()
	t.notify(send)
}

func (t *tenant) notify(uris []string) {
	for _, u := range uris {
		_ = t.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: u})
	}
}

// close stops the follower and the coalescing timer.
func (t *tenant) close() {
	t.stop()
	t.mu.Lock()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.mu.Unlock()
}

// addResources adds the two templates to s.
func (t *tenant) addResources(s *mcp.Server) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: SkillTemplate, Name: "skill", MIMEType: mimeJSON,
		Description: "The live providers of a skill (healthy or degraded), healthy first; as find_skill.",
	}, t.readSkill)
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: ServerTemplate, Name: "server", MIMEType: mimeJSON,
		Description: "One server of this tenant with its skills; as get_server.",
	}, t.readServer)
}

func (t *tenant) readSkill(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	uri := req.Params.URI
	name, err := url.PathUnescape(strings.TrimPrefix(uri, SkillURIPrefix))
	if err != nil || !strings.HasPrefix(uri, SkillURIPrefix) || checkSkillName(name) != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	p, err := t.providers(ctx, name, "")
	if err != nil {
		return nil, resourceError(err)
	}
	return jsonContents(uri, p)
}

func (t *tenant) readServer(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	uri := req.Params.URI
	d, err := t.serverByModule(ctx, strings.TrimPrefix(uri, ServerURIPrefix))
	if errors.Is(err, errNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, resourceError(err)
	}
	return jsonContents(uri, d)
}

// resourceError is the JSON-RPC error of a resource read that failed: one
// the read gave itself as it is, any other (the store's failure, said by
// fault) as the server error -32000 that /mcp answers when the registry is
// unavailable. The SDK would answer a plain error with code 0, which
// JSON-RPC does not define.
func resourceError(err error) error {
	if wire, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return wire
	}
	return &jsonrpc.Error{Code: codeServerError, Message: err.Error()}
}

func jsonContents(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeJSON, Text: string(b)}}}, nil
}
