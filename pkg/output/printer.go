package output

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Printer prints results in one format to a command's streams.
type Printer struct {
	// Out receives the result; ErrOut the notes for people (an empty list).
	Out, ErrOut io.Writer
	// Format is table, wide, json or yaml; empty means table.
	Format Format
	// Terminal says Out is a terminal: aligned columns, a header and ages.
	Terminal bool
	// Color allows ANSI colour on Out (see ColorEnabled).
	Color bool
	// Now is the clock ages are measured against; nil means time.Now.
	Now func() time.Time
}

func (p *Printer) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

func (p *Printer) format() Format {
	if p.Format == "" {
		return Table
	}
	return p.Format
}

// when prints a time for the audience: an age on a terminal, RFC 3339 piped.
func (p *Printer) when(t time.Time) string {
	if p.Terminal {
		return Age(t, p.now())
	}
	return Timestamp(t)
}

func (p *Printer) status(s registry.Status) string {
	if p.Color {
		return paint(statusColor(s), Escape(string(s)))
	}
	return Escape(string(s))
}

// dash stands in for an empty cell on a terminal; piped it stays empty.
func (p *Printer) dash(s string) string {
	if s == "" && p.Terminal {
		return "-"
	}
	return s
}

// empty says on ErrOut that a list is empty, in table and wide only; json
// and yaml print an empty array on Out.
func (p *Printer) empty(what string, list any) error {
	if p.format().Structured() {
		return Write(p.Out, p.format(), list)
	}
	_, err := fmt.Fprintf(p.ErrOut, "No %s found\n", what)
	return err
}

// Servers prints a list of servers.
func (p *Printer) Servers(servers []registry.Server) error {
	return p.ServersWithAvailability(servers, nil)
}

// ServersWithAvailability prints a list of servers; -o wide adds each
// one's available ratio of the last 24 h from ratios.
func (p *Printer) ServersWithAvailability(servers []registry.Server, ratios map[uuid.UUID]registry.AvailabilityRatio) error {
	if servers == nil {
		servers = []registry.Server{}
	}
	if len(servers) == 0 {
		return p.empty("servers", servers)
	}
	f := p.format()
	if f.Structured() {
		return Write(p.Out, f, servers)
	}
	wide := f == Wide
	header := []string{"MODULE", "VERSION", "STATUS", "PROTOCOLS", "LAST HEARTBEAT"}
	if wide {
		header = []string{"SERVER ID", "MODULE", "VERSION", "STATUS", "AVAILABLE 24H", "PROTOCOLS", "LAST HEARTBEAT", "REGISTERED", "TRACE ID", "CAPABILITIES"}
	}
	rows := make([][]string, 0, len(servers))
	for _, s := range servers {
		protocols := Escape(strings.Join(s.SupportedProtocols, ","))
		if !wide {
			rows = append(rows, []string{Escape(s.ModuleName), Escape(s.Version), p.status(s.Status), protocols,
				p.when(s.LastHeartbeatAt)})
			continue
		}
		rows = append(rows, []string{
			s.ServerID.String(), Escape(s.ModuleName), Escape(s.Version), p.status(s.Status),
			p.availabilityCell(ratios, s.ServerID), protocols, p.when(s.LastHeartbeatAt), p.when(s.RegisteredAt),
			Escape(s.TraceID), p.dash(Escape(strings.Join(CapabilityKeys(s.CapabilityAdvertisement), ","))),
		})
	}
	return WriteTable(p.Out, p.Terminal, p.header(header), rows)
}

func (p *Printer) header(h []string) []string {
	if !p.Terminal {
		return nil
	}
	return h
}

// Server prints one server: in table and wide a list of its fields, one a
// line ("Field: value" on a terminal, "field<TAB>value" piped).
func (p *Printer) Server(s registry.Server) error {
	f := p.format()
	if f.Structured() {
		return Write(p.Out, f, s)
	}
	deregistered := ""
	if s.DeregisteredAt != nil {
		deregistered = p.when(*s.DeregisteredAt)
	}
	interval := ""
	if s.HeartbeatIntervalSecs > 0 {
		interval = strconv.FormatFloat(s.HeartbeatIntervalSecs, 'f', -1, 64)
		if p.Terminal {
			interval = (time.Duration(s.HeartbeatIntervalSecs * float64(time.Second))).String()
		}
	}
	fields := []field{
		{"Server ID", "server_id", s.ServerID.String()},
		{"Tenant ID", "tenant_id", s.TenantID.String()},
		{"Module", "module_name", Escape(s.ModuleName)},
		{"Version", "version", Escape(s.Version)},
		{"Status", "status", p.status(s.Status)},
		{"Protocols", "supported_protocols", Escape(strings.Join(s.SupportedProtocols, ","))},
		{"Capabilities", "capability_advertisement", Escape(strings.Join(CapabilityKeys(s.CapabilityAdvertisement), ","))},
		{"Last heartbeat", "last_heartbeat_at", p.when(s.LastHeartbeatAt)},
		{"Registered", "registered_at", p.when(s.RegisteredAt)},
		{"Deregistered", "deregistered_at", deregistered},
		{"Trace ID", "trace_id", Escape(s.TraceID)},
		{"Heartbeat interval", "heartbeat_interval_seconds", interval},
	}
	return p.fields(fields)
}

// field is one line of a single object's text form.
type field struct {
	label string // for people, on a terminal
	key   string // for scripts, piped: the JSON name
	value string
}

func (p *Printer) fields(fields []field) error {
	rows := make([][]string, len(fields))
	for i, fl := range fields {
		if p.Terminal {
			rows[i] = []string{fl.label + ":", p.dash(fl.value)}
		} else {
			rows[i] = []string{fl.key, fl.value}
		}
	}
	return WriteTable(p.Out, p.Terminal, nil, rows)
}

// Skills prints the skills of a server.
func (p *Printer) Skills(skills []registry.Skill) error {
	if skills == nil {
		skills = []registry.Skill{}
	}
	if len(skills) == 0 {
		return p.empty("skills", skills)
	}
	f := p.format()
	if f.Structured() {
		return Write(p.Out, f, skills)
	}
	header := []string{"NAME", "AVAILABLE", "REASON", "DESCRIPTION"}
	if f == Wide {
		header = append([]string{"SKILL ID"}, header...)
	}
	rows := make([][]string, 0, len(skills))
	for _, s := range skills {
		reason := ""
		if s.UnavailableReason != nil {
			reason = *s.UnavailableReason
		}
		row := []string{Escape(s.Name), p.available(s.Available), p.dash(Escape(reason)), p.dash(Escape(s.Description))}
		if f == Wide {
			row = append([]string{s.SkillID.String()}, row...)
		}
		rows = append(rows, row)
	}
	return WriteTable(p.Out, p.Terminal, p.header(header), rows)
}

// Events prints audit events, in the order given (the API's: oldest first).
func (p *Printer) Events(events []registry.Event) error {
	if events == nil {
		events = []registry.Event{}
	}
	if len(events) == 0 {
		return p.empty("audit events", events)
	}
	f := p.format()
	if f.Structured() {
		return Write(p.Out, f, events)
	}
	header := []string{"OCCURRED", "KIND", "MODULE", "FROM", "TO"}
	if f == Wide {
		header = []string{"OCCURRED", "EVENT ID", "KIND", "SERVER ID", "MODULE", "FROM", "TO", "TRACE ID", "SKILLS AFFECTED"}
	}
	rows := make([][]string, 0, len(events))
	for _, e := range events {
		from := ""
		if e.FromStatus != nil {
			from = p.status(*e.FromStatus)
		}
		kind, module := Escape(string(e.Kind)), Escape(e.ModuleName)
		row := []string{p.when(e.OccurredAt), kind, module, p.dash(from), p.status(e.ToStatus)}
		if f == Wide {
			row = []string{
				p.when(e.OccurredAt), e.EventID.String(), kind, e.ServerID.String(), module,
				p.dash(from), p.status(e.ToStatus), Escape(e.TraceID), p.dash(Escape(strings.Join(e.Body.SkillsAffected, ","))),
			}
		}
		rows = append(rows, row)
	}
	return WriteTable(p.Out, p.Terminal, p.header(header), rows)
}

// KV is one line of a text result that is neither a server nor a list.
type KV struct {
	Label string // for people, on a terminal ("Applied version")
	Key   string // for scripts, piped ("version")
	Value string
}

// Object prints v as json or yaml, and in table and wide the lines kv.
func (p *Printer) Object(v any, kv []KV) error {
	f := p.format()
	if f.Structured() {
		return Write(p.Out, f, v)
	}
	fields := make([]field, len(kv))
	for i, l := range kv {
		fields[i] = field{label: l.Label, key: l.Key, value: Escape(l.Value)}
	}
	return p.fields(fields)
}

// CapabilityKeys returns the top-level keys of a capability advertisement,
// sorted; nil when it is empty or not a JSON object.
func CapabilityKeys(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Uint is n in decimal.
func Uint(n uint) string { return strconv.FormatUint(uint64(n), 10) }
