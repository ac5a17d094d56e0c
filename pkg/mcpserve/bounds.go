package mcpserve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Bounds of one session or call (the contract's; not configurable).
const (
	// MaxSubscriptions bounds the resources one session subscribes to at
	// once (a 2025-11-25 session's resources/subscribe calls, a 2026-07-28
	// subscriptions/listen call's resourceSubscriptions).
	MaxSubscriptions = 64
	// MaxClientInfoBytes bounds a call's clientInfo and its capabilities
	// (initialize's, or the 2026-07-28 _meta keys), each as JSON text.
	MaxClientInfoBytes = 16 << 10
	// MaxMetaBytes bounds the _meta of an initialize call, which its
	// session keeps, as JSON text.
	MaxMetaBytes = 16 << 10
	// MaxProtocolVersionLen bounds initialize's protocolVersion (a
	// revision is a date, 2025-11-25).
	MaxProtocolVersionLen = 32
	// MaxInitializeBytes bounds the whole params of an initialize call as
	// JSON text: its clientInfo, capabilities and _meta at their bounds,
	// and a little for the rest.
	MaxInitializeBytes = MaxClientInfoBytes*2 + MaxMetaBytes + 1<<10
)

// rpcMessage is what the endpoint reads of one JSON-RPC message of a
// request body before the SDK does. Keys are matched exactly, and the
// first JSON value of a body read with what follows it ignored, as the
// SDK reads them (encoding/json would match "Params" too).
type rpcMessage struct {
	ID     json.RawMessage
	Method string
	// RawParams is the params as sent; Params what is read of it (zero
	// when it is no object).
	RawParams json.RawMessage
	Params    struct {
		ClientInfo, Capabilities, ProtocolVersion, RawMeta json.RawMessage
		Meta                                               map[string]json.RawMessage
	}
}

// readMessage reads one message from its JSON text; false if it is no
// object.
func readMessage(raw []byte) (rpcMessage, bool) {
	var m rpcMessage
	var fields map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&fields) != nil || fields == nil {
		return m, false
	}
	m.ID, m.RawParams = fields["id"], fields["params"]
	_ = json.Unmarshal(fields["method"], &m.Method)
	var params map[string]json.RawMessage
	if json.Unmarshal(m.RawParams, &params) == nil {
		p := &m.Params
		p.ClientInfo, p.Capabilities = params["clientInfo"], params["capabilities"]
		p.ProtocolVersion, p.RawMeta = params["protocolVersion"], params["_meta"]
		_ = json.Unmarshal(p.RawMeta, &p.Meta)
	}
	return m, true
}

// isCall reports whether m is a request that expects an answer.
func (m *rpcMessage) isCall() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// parseMessages reads the messages of a request body, best effort: what
// does not parse is left to the SDK, which refuses it.
func parseMessages(body []byte) []rpcMessage {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(body, &raws) != nil {
			return nil
		}
		ms := make([]rpcMessage, 0, len(raws))
		for _, raw := range raws {
			m, ok := readMessage(raw)
			if !ok {
				return nil
			}
			ms = append(ms, m)
		}
		return ms
	}
	m, ok := readMessage(body)
	if !ok {
		return nil
	}
	return []rpcMessage{m}
}

// isBatch reports whether a request body is a JSON-RPC batch (an array),
// which the endpoint does not serve.
func isBatch(body []byte) bool {
	body = bytes.TrimSpace(body)
	return len(body) > 0 && body[0] == '['
}

// oversized returns the first message that a session would keep too much
// of, and why, naming the field: a client description past
// MaxClientInfoBytes, or an initialize call past its other bounds.
func oversized(ms []rpcMessage) (*rpcMessage, string) {
	for i := range ms {
		m := &ms[i]
		if m.Method == "initialize" {
			if why := initializeBounds(m); why != "" {
				return m, why
			}
		}
		for _, f := range []struct {
			name string
			v    json.RawMessage
		}{
			{"params.clientInfo", m.Params.ClientInfo},
			{"params.capabilities", m.Params.Capabilities},
			{"params._meta." + mcp.MetaKeyClientInfo, m.Params.Meta[mcp.MetaKeyClientInfo]},
			{"params._meta." + mcp.MetaKeyClientCapabilities, m.Params.Meta[mcp.MetaKeyClientCapabilities]},
		} {
			if len(f.v) > MaxClientInfoBytes {
				return m, fmt.Sprintf("%s is larger than %d bytes of JSON", f.name, MaxClientInfoBytes)
			}
		}
	}
	return nil, ""
}

// initializeBounds says what of an initialize call's params is past the
// bounds of what its session keeps, naming the field ("" if nothing).
func initializeBounds(m *rpcMessage) string {
	if v := m.Params.ProtocolVersion; len(v) > 0 {
		var s string
		if len(v) > 8*MaxProtocolVersionLen || json.Unmarshal(v, &s) != nil || len(s) == 0 ||
			len(s) > MaxProtocolVersionLen {
			return fmt.Sprintf("params.protocolVersion must be a revision such as %s (a string of 1-%d bytes)",
				"2025-11-25", MaxProtocolVersionLen)
		}
	}
	if len(m.Params.RawMeta) > MaxMetaBytes {
		return fmt.Sprintf("params._meta is larger than %d bytes of JSON", MaxMetaBytes)
	}
	if len(m.RawParams) > MaxInitializeBytes {
		return fmt.Sprintf("params is larger than %d bytes of JSON", MaxInitializeBytes)
	}
	return ""
}

// isListen reports whether a request's messages open a
// subscriptions/listen stream.
func isListen(ms []rpcMessage) bool {
	for i := range ms {
		if ms[i].Method == "subscriptions/listen" {
			return true
		}
	}
	return false
}

// subjectOf is the key the sessions of a caller are counted under: its
// token's sub, or, for a token without one, the token itself.
func subjectOf(r *http.Request, claims auth.Claims) string {
	if claims.Subject != "" {
		return "sub:" + claims.Subject
	}
	sum := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	return "token:" + hex.EncodeToString(sum[:12])
}

// reserveSession takes one of the tenant's and the subject's places for a
// session about to be opened. It answers the refusal when either is full;
// else commit, called with the session's id once it is served (empty if
// none was opened), gives the place to the session or back.
func (t *tenant) reserveSession(subject string, perTenant, perSubject int) (commit func(id string), refusal string) {
	t.smu.Lock()
	defer t.smu.Unlock()
	live := make(map[string]bool)
	n, mine := t.opening, t.openingBy[subject]
	for s := range t.server.Sessions() {
		id := s.ID()
		if id == "" {
			continue
		}
		live[id] = true
		n++
		if t.owners[id] == subject {
			mine++
		}
	}
	for id := range t.owners {
		if !live[id] {
			delete(t.owners, id)
		}
	}
	switch {
	case n >= perTenant:
		return nil, fmt.Sprintf("the tenant has %d MCP sessions open, as many as it may; close one, or use revision %s, "+
			"which needs none", perTenant, statelessRevision)
	case perSubject > 0 && mine >= perSubject:
		return nil, fmt.Sprintf("this token's subject has %d MCP sessions open, as many as one subject may; close one, "+
			"or use revision %s, which needs none", perSubject, statelessRevision)
	}
	t.opening++
	t.openingBy[subject]++
	return func(id string) {
		t.smu.Lock()
		defer t.smu.Unlock()
		t.opening--
		if t.openingBy[subject]--; t.openingBy[subject] <= 0 {
			delete(t.openingBy, subject)
		}
		if id != "" {
			t.owners[id] = subject
		}
	}, ""
}

// invalidParams is a JSON-RPC -32602 error.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// checkURI checks a subscription's URI against the name rules.
func checkURI(u string) error {
	switch {
	case strings.HasPrefix(u, SkillURIPrefix):
		name, err := url.PathUnescape(u[len(SkillURIPrefix):])
		if err != nil || checkSkillName(name) != nil {
			return invalidParams("uri: the skill name of %s must be 1-%d characters of valid UTF-8 (path-escaped)",
				SkillTemplate, registry.MaxSkillNameLen)
		}
	case strings.HasPrefix(u, ServerURIPrefix):
		if !registry.ValidModuleName(u[len(ServerURIPrefix):]) {
			return invalidParams("uri: the module name of %s must be 1-63 of a-z, 0-9 and '-', starting with a letter",
				ServerTemplate)
		}
	default:
		return invalidParams("uri: not a resource of mcpd (%s or %s)", SkillTemplate, ServerTemplate)
	}
	return nil
}

// checkSubscription accepts subscriptions to mcpd's two kinds of resource
// whose names keep the rules, at most MaxSubscriptions per session.
func (t *tenant) checkSubscription(_ context.Context, req *mcp.SubscribeRequest) error {
	u := req.Params.URI
	if err := checkURI(u); err != nil {
		return err
	}
	t.smu.Lock()
	defer t.smu.Unlock()
	subs := t.subs[req.Session]
	if _, ok := subs[u]; !ok && len(subs) >= MaxSubscriptions {
		return invalidParams("a session subscribes to at most %d resources; unsubscribe from one first", MaxSubscriptions)
	}
	if subs == nil {
		subs = make(map[string]struct{})
		t.subs[req.Session] = subs
	}
	subs[u] = struct{}{}
	t.subscribed.Add(1)
	return nil
}

// unsubscribe forgets a session's subscription.
func (t *tenant) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	t.smu.Lock()
	defer t.smu.Unlock()
	if subs := t.subs[req.Session]; subs != nil {
		delete(subs, req.Params.URI)
		if len(subs) == 0 {
			delete(t.subs, req.Session)
		}
	}
	return nil
}

// pruneSubscriptions forgets the subscriptions of sessions that ended
// (the SDK drops its own, without telling).
func (t *tenant) pruneSubscriptions() {
	t.smu.Lock()
	defer t.smu.Unlock()
	if len(t.subs) == 0 {
		return
	}
	live := make(map[*mcp.ServerSession]bool)
	for s := range t.server.Sessions() {
		live[s] = true
	}
	for s := range t.subs {
		if !live[s] {
			delete(t.subs, s)
		}
	}
}

// subscriptions counts the subscriptions held, for tests.
func (t *tenant) subscriptions() int {
	t.smu.Lock()
	defer t.smu.Unlock()
	n := 0
	for _, s := range t.subs {
		n += len(s)
	}
	return n
}

// writeRPC answers a JSON-RPC error for the request id (nil: none).
func writeRPC(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// sdkPlainError turns one of the SDK's text/plain refusals of a POST into
// a JSON-RPC error; ok is false for those it leaves as they are (a wrong
// Content-Type or Accept header, a missing session).
func sdkPlainError(text string) (code int64, msg string, ok bool) {
	const notHandled = "JSON RPC not handled: "
	switch {
	case strings.HasPrefix(text, notHandled):
		method := strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(text, notHandled)), " unsupported")
		return jsonrpc.CodeMethodNotFound, "method " + clip(method, 80) + " is not one mcpd serves", true
	case strings.HasPrefix(text, "malformed payload"):
		return jsonrpc.CodeParseError, "the body is not a JSON-RPC 2.0 message (an object with \"jsonrpc\": \"2.0\", " +
			"a string \"method\" and a string or number \"id\")", true
	case strings.HasPrefix(text, "JSON RPC invalid request: "):
		return jsonrpc.CodeInvalidRequest, "invalid request: " + clip(strings.TrimSpace(
			strings.TrimPrefix(text, "JSON RPC invalid request: ")), 120), true
	}
	return 0, "", false
}

// clip shortens s to at most n bytes of whole characters.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

var (
	// goTypeRE finds the error messages of Go's JSON decoder, which name
	// the SDK's types.
	goTypeRE  = regexp.MustCompile(`Go (struct field|value of type)|into a \*?[a-z]+\.[A-Za-z]`)
	fieldRE   = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.[A-Za-z0-9_]+\.([A-Za-z0-9_.]+) of type`)
	handlerRE = regexp.MustCompile(`^handling '([^']{1,64})'`)
)

// plainErrors rewrites a JSON-RPC error in p (a JSON answer or one SSE
// event) whose message names Go types, or a tool error whose text does,
// into plain words: which field has the wrong JSON type. Anything else is
// returned as is.
func plainErrors(p []byte) []byte {
	if !bytes.Contains(p, []byte(`"error"`)) && !bytes.Contains(p, []byte(`"isError"`)) || !goTypeRE.Match(p) {
		return p
	}
	// An SSE event ("event: message\ndata: {...}\n\n") or a JSON body.
	var prefix, data, suffix []byte
	if i := bytes.Index(p, []byte("data: ")); i >= 0 && (i == 0 || p[i-1] == '\n') {
		i += len("data: ")
		end := bytes.IndexByte(p[i:], '\n')
		if end < 0 {
			end = len(p) - i
		}
		prefix, data, suffix = p[:i], p[i:i+end], p[i+end:]
	} else {
		data = p
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var msg map[string]any
	if dec.Decode(&msg) != nil {
		return p
	}
	changed := false
	if e, ok := msg["error"].(map[string]any); ok {
		if m, _ := e["message"].(string); goTypeRE.MatchString(m) {
			method := "the call"
			if h := handlerRE.FindStringSubmatch(m); h != nil {
				method = h[1]
			}
			e["message"] = "invalid params of " + method + ": " + wrongType(m)
			if c, _ := e["code"].(json.Number); c == "" || c == "0" {
				e["code"] = jsonrpc.CodeInvalidParams
			}
			delete(e, "data")
			changed = true
		}
	}
	if r, ok := msg["result"].(map[string]any); ok && r["isError"] == true {
		content, _ := r["content"].([]any)
		for _, c := range content {
			if c, ok := c.(map[string]any); ok {
				if text, _ := c["text"].(string); goTypeRE.MatchString(text) {
					c["text"] = "invalid arguments: " + wrongType(text)
					changed = true
				}
			}
		}
	}
	if !changed {
		return p
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return p
	}
	out := make([]byte, 0, len(prefix)+len(b)+len(suffix))
	return append(append(append(out, prefix...), b...), suffix...)
}

// wrongType says in plain words what a JSON decoding error of Go says:
// which field has the wrong type, or that the value is no JSON object.
func wrongType(msg string) string {
	if m := fieldRE.FindStringSubmatch(msg); m != nil {
		return m[1] + " has the wrong JSON type"
	}
	if strings.Contains(msg, "Go value of type map[") || strings.Contains(msg, "Go value of type mcp.") ||
		strings.Contains(msg, "Go value of type *mcp.") {
		return "must be a JSON object"
	}
	return "a value has the wrong JSON type"
}
