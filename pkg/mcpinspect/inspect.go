package mcpinspect

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Where a Report's list of revisions came from.
const (
	// RevisionsDiscover: the server's answer to server/discover.
	RevisionsDiscover = "server/discover"
	// RevisionsInitialize: one initialize per revision of the SDK's list.
	RevisionsInitialize = "initialize"
	// RevisionsNegotiated: the negotiated revision alone (probing off, or
	// every probe failed).
	RevisionsNegotiated = "negotiated"
)

// DefaultProbeTimeout bounds one extra handshake that asks whether a
// server accepts a revision.
const DefaultProbeTimeout = 10 * time.Second

// Report is what an MCP server says of itself.
type Report struct {
	// Name, Title and Version are its serverInfo.
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
	// Protocol is the revision negotiated with it.
	Protocol string `json:"protocol"`
	// Protocols are the revisions it accepts of those the SDK knows, newest
	// first; Protocol is one of them.
	Protocols []string `json:"protocols"`
	// ProtocolsFrom says how Protocols was learned: RevisionsDiscover,
	// RevisionsInitialize or RevisionsNegotiated.
	ProtocolsFrom string `json:"protocols_from"`
	// Capabilities is its capabilities object as it sent it.
	Capabilities json.RawMessage `json:"capabilities"`
	// Tools are its tools, in the order it listed them.
	Tools []Tool `json:"tools"`
}

// KnownRevisions returns the revisions the MCP SDK in this build speaks,
// newest first.
func KnownRevisions() []string { return mcp.SupportedProtocolVersions() }

// Describe returns the report of the connected server: the handshake's
// answer and its tools. Protocols is what server/discover said, else the
// negotiated revision alone (see ProbeRevisions).
func (s *Session) Describe(ctx context.Context) (Report, error) {
	tools, err := s.Tools(ctx)
	if err != nil {
		return Report{}, err
	}
	info := s.Info()
	r := Report{
		Name: info.Name, Title: info.Title, Version: info.Version,
		Protocol:     info.Protocol,
		Capabilities: info.Capabilities,
		Tools:        tools,
	}
	r.Protocols, r.ProtocolsFrom = []string{info.Protocol}, RevisionsNegotiated
	if info.Discovered != nil {
		r.Protocols, r.ProtocolsFrom = revisions(append(info.Discovered, info.Protocol)), RevisionsDiscover
	}
	return r, nil
}

// revisions keeps the known revisions of vs, newest first, once each.
func revisions(vs []string) []string {
	var out []string
	for _, k := range KnownRevisions() {
		if slices.Contains(vs, k) {
			out = append(out, k)
		}
	}
	return out
}

// ProbeRevisions asks the server once per revision of the SDK's list that
// r does not settle yet whether it accepts it: an initialize asking for it,
// answered with that same revision, means yes. Revisions from 2026-07-28
// on are not asked (a server that speaks them has server/discover, whose
// answer r already holds). Each try is its own connection (over stdio, its
// own process), bounded by timeout. It returns r with Protocols and
// ProtocolsFrom set.
func ProbeRevisions(ctx context.Context, t Target, opts Options, r Report, timeout time.Duration) Report {
	if r.ProtocolsFrom == RevisionsDiscover {
		return r
	}
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	accepted := []string{r.Protocol}
	tried := 0
	for _, v := range KnownRevisions() {
		if v == r.Protocol || v >= newProtocolRevision {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		tried++
		if acceptsRevision(ctx, t, opts, v, timeout) {
			accepted = append(accepted, v)
		}
	}
	r.Protocols = revisions(accepted)
	if tried > 0 {
		r.ProtocolsFrom = RevisionsInitialize
	}
	return r
}

func acceptsRevision(ctx context.Context, t Target, opts Options, v string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o := opts
	o.ProtocolVersion, o.OnToolsChanged = v, nil
	o.Logger = nil
	t.Stderr = nil
	s, err := Connect(ctx, t, o)
	if err != nil {
		return false
	}
	defer s.Close()
	return s.Info().Protocol == v
}

// InspectOptions configure Inspect.
type InspectOptions struct {
	Options
	// ProbeRevisions, when set, asks the server about each other revision
	// when it has no server/discover (see ProbeRevisions).
	ProbeRevisions bool
	// ProbeTimeout bounds each of those tries; zero: DefaultProbeTimeout.
	ProbeTimeout time.Duration
}

// Inspect connects to the server, describes it and disconnects.
func Inspect(ctx context.Context, t Target, opts InspectOptions) (Report, error) {
	s, err := Connect(ctx, t, opts.Options)
	if err != nil {
		return Report{}, fmt.Errorf("inspect %s: %w", t, err)
	}
	r, err := s.Describe(ctx)
	_ = s.Close()
	if err != nil {
		return Report{}, fmt.Errorf("inspect %s: %w", t, err)
	}
	if opts.ProbeRevisions {
		r = ProbeRevisions(ctx, t, opts.Options, r, opts.ProbeTimeout)
	}
	return r, nil
}
