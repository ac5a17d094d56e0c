package simulate

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Action is what a scenario event does to its servers.
type Action string

// The four scenario actions.
const (
	// ActionStop stops the servers' heartbeats.
	ActionStop Action = "stop"
	// ActionResume makes stopped servers heartbeat again, at once.
	ActionResume Action = "resume"
	// ActionDeregister deregisters the servers; they heartbeat no more.
	ActionDeregister Action = "deregister"
	// ActionFlap stops the servers, resumes them a period later, and so on
	// until Until or the end of the run.
	ActionFlap Action = "flap"
)

// Scenario is a timeline of events applied to the simulated servers.
type Scenario struct {
	// DeregisterAtEnd deregisters every server after the run (and after
	// verification); by default they are left registered.
	DeregisterAtEnd bool
	// Events in file order.
	Events []Event
}

// Event is one entry of a scenario.
type Event struct {
	At     time.Duration // after the start of the heartbeat phase
	Action Action
	Period time.Duration // flap only: time between a stop and a resume
	Until  time.Duration // flap only: when flapping ends (0: the end of the run)
	Target Target
	Line   int // in the scenario file
}

// Target says which servers an event applies to; exactly one field is set.
// Servers are numbered from 0: index 0 is module PREFIX-0001.
type Target struct {
	Indexes []int       // servers: [0, 1, 2]
	Range   *IndexRange // range: "10-19" (or "7")
	All     bool        // range: "all"
	Percent float64     // percent: 20, the first 20% of the servers by index
}

// IndexRange is an inclusive range of server indexes.
type IndexRange struct{ From, To int }

// Resolve returns the indexes of the target among n servers.
func (t Target) Resolve(n int) ([]int, error) {
	switch {
	case t.All:
		return seq(0, n-1), nil
	case t.Range != nil:
		if t.Range.To >= n {
			return nil, fmt.Errorf("range %d-%d is out of range for %d servers", t.Range.From, t.Range.To, n)
		}
		return seq(t.Range.From, t.Range.To), nil
	case t.Percent > 0:
		k := int(math.Round(float64(n) * t.Percent / 100))
		return seq(0, min(k, n)-1), nil
	default:
		for _, i := range t.Indexes {
			if i >= n {
				return nil, fmt.Errorf("index %d is out of range for %d servers", i, n)
			}
		}
		return slices.Clone(t.Indexes), nil
	}
}

func seq(from, to int) []int {
	out := make([]int, 0, max(to-from+1, 0))
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// ErrScenario marks a scenario that cannot be read or makes no sense.
var ErrScenario = errors.New("invalid scenario")

// LoadScenario reads and checks the YAML scenario at path.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	sc, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("load scenario %s: %w", path, err)
	}
	return sc, nil
}

// ParseScenario parses and checks a YAML scenario. Unknown keys are errors.
func ParseScenario(data []byte) (*Scenario, error) {
	var f struct {
		DeregisterAtEnd bool       `yaml:"deregister_at_end"`
		Events          []rawEvent `yaml:"events"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the file is empty", ErrScenario)
		}
		return nil, fmt.Errorf("%w: %w", ErrScenario, err)
	}
	sc := &Scenario{DeregisterAtEnd: f.DeregisterAtEnd}
	for i, raw := range f.Events {
		ev, err := raw.event()
		if err != nil {
			return nil, fmt.Errorf("%w: event %d (line %d): %w", ErrScenario, i+1, raw.line, err)
		}
		sc.Events = append(sc.Events, ev)
	}
	return sc, nil
}

// rawEvent is an event as the file spells it.
type rawEvent struct {
	At      string   `yaml:"at"`
	Action  string   `yaml:"action"`
	Servers []int    `yaml:"servers"`
	Range   string   `yaml:"range"`
	Percent *float64 `yaml:"percent"`
	Period  string   `yaml:"period"`
	Until   string   `yaml:"until"`
	line    int
}

var eventKeys = []string{"at", "action", "servers", "range", "percent", "period", "until"}

// UnmarshalYAML decodes one event, rejecting unknown keys and keeping its
// line for messages.
func (r *rawEvent) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: an event is a mapping with at, action and servers, range or percent", n.Line)
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i].Value; !slices.Contains(eventKeys, k) {
			return fmt.Errorf("line %d: unknown event key %q (want one of %s)", n.Content[i].Line, k, strings.Join(eventKeys, ", "))
		}
	}
	type plain rawEvent
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*r = rawEvent(p)
	r.line = n.Line
	return nil
}

func (r rawEvent) event() (Event, error) {
	ev := Event{Action: Action(r.Action), Line: r.line}
	if r.At == "" {
		return ev, errors.New("at is missing")
	}
	at, err := parseDuration("at", r.At)
	if err != nil {
		return ev, err
	}
	ev.At = at
	switch ev.Action {
	case ActionStop, ActionResume, ActionDeregister:
		if r.Period != "" || r.Until != "" {
			return ev, fmt.Errorf("period and until belong to flap, not %s", ev.Action)
		}
	case ActionFlap:
		if r.Period == "" {
			return ev, errors.New("flap needs a period")
		}
		if ev.Period, err = parseDuration("period", r.Period); err != nil {
			return ev, err
		}
		if ev.Period < time.Millisecond {
			return ev, fmt.Errorf("period %s is shorter than 1ms", ev.Period)
		}
		if r.Until != "" {
			if ev.Until, err = parseDuration("until", r.Until); err != nil {
				return ev, err
			}
			if ev.Until <= ev.At {
				return ev, fmt.Errorf("until %s is not after at %s", ev.Until, ev.At)
			}
		}
	case "":
		return ev, errors.New("action is missing (stop, resume, deregister or flap)")
	default:
		return ev, fmt.Errorf("unknown action %q (want stop, resume, deregister or flap)", r.Action)
	}

	given := 0
	if r.Servers != nil {
		given++
	}
	if r.Range != "" {
		given++
	}
	if r.Percent != nil {
		given++
	}
	if given != 1 {
		return ev, errors.New("give exactly one of servers, range, percent")
	}
	switch {
	case r.Servers != nil:
		if len(r.Servers) == 0 {
			return ev, errors.New("servers is empty")
		}
		for _, i := range r.Servers {
			if i < 0 {
				return ev, fmt.Errorf("server index %d is negative", i)
			}
		}
		ev.Target.Indexes = slices.Clone(r.Servers)
	case r.Range != "":
		if err := parseRange(r.Range, &ev.Target); err != nil {
			return ev, err
		}
	default:
		p := *r.Percent
		if !(p > 0 && p <= 100) {
			return ev, fmt.Errorf("percent %v is not in (0, 100]", p)
		}
		ev.Target.Percent = p
	}
	return ev, nil
}

func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration like 10s or 1m30s", field, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s: %s is negative", field, d)
	}
	return d, nil
}

// parseRange reads "all", "N" or "A-B" into t.
func parseRange(s string, t *Target) error {
	s = strings.TrimSpace(s)
	if s == "all" {
		t.All = true
		return nil
	}
	from, to, found := strings.Cut(s, "-")
	if !found {
		to = from
	}
	a, errA := strconv.Atoi(strings.TrimSpace(from))
	b, errB := strconv.Atoi(strings.TrimSpace(to))
	if errA != nil || errB != nil || a < 0 || b < a {
		return fmt.Errorf("range %q is not \"all\", \"N\" or \"A-B\" with 0 <= A <= B", s)
	}
	t.Range = &IndexRange{From: a, To: b}
	return nil
}

// step is one change applied at one time to resolved servers.
type step struct {
	at      time.Duration
	action  Action // stop, resume or deregister
	servers []int
}

// maxSteps bounds the expanded timeline (flaps included).
const maxSteps = 100_000

// plan resolves every event against n servers and a run of duration, and
// expands flaps into stops and resumes, in time order.
func (sc *Scenario) plan(n int, duration time.Duration) ([]step, error) {
	if sc == nil {
		return nil, nil
	}
	var steps []step
	for i, ev := range sc.Events {
		where := fmt.Sprintf("event %d (line %d)", i+1, ev.Line)
		if ev.At >= duration {
			return nil, fmt.Errorf("%w: %s: at %s is not before the end of the run (%s)", ErrScenario, where, ev.At, duration)
		}
		servers, err := ev.Target.Resolve(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrScenario, where, err)
		}
		if ev.Action != ActionFlap {
			steps = append(steps, step{at: ev.At, action: ev.Action, servers: servers})
			continue
		}
		end := duration
		if ev.Until > 0 {
			end = min(end, ev.Until)
		}
		if int64((end-ev.At)/ev.Period) > maxSteps {
			return nil, fmt.Errorf("%w: %s: period %s makes more than %d steps", ErrScenario, where, ev.Period, maxSteps)
		}
		action := ActionStop
		for at := ev.At; at < end; at += ev.Period {
			steps = append(steps, step{at: at, action: action, servers: servers})
			if action == ActionStop {
				action = ActionResume
			} else {
				action = ActionStop
			}
		}
		if action == ActionResume && ev.Until > 0 && ev.Until < duration {
			// Flapping ends with the servers running.
			steps = append(steps, step{at: ev.Until, action: ActionResume, servers: servers})
		}
	}
	if len(steps) > maxSteps {
		return nil, fmt.Errorf("%w: more than %d steps", ErrScenario, maxSteps)
	}
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
	return steps, nil
}
