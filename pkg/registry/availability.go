package registry

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
)

// AvailabilityWindow is a span of time, ending now, that availability is
// reported over: one of AvailabilityWindows.
type AvailabilityWindow string

// The windows availability is reported over.
const (
	Window1h  AvailabilityWindow = "1h"
	Window24h AvailabilityWindow = "24h"
	Window7d  AvailabilityWindow = "7d"
	Window30d AvailabilityWindow = "30d"
)

// AvailabilityWindows lists every window, shortest first.
var AvailabilityWindows = []AvailabilityWindow{Window1h, Window24h, Window7d, Window30d}

// DefaultAvailabilityWindow is the window of a request that names none.
const DefaultAvailabilityWindow = Window24h

// MaxOutages bounds the outages an Availability lists, newest first.
const MaxOutages = 100

// MaxAvailabilityRatios bounds the servers of one AvailabilityRatios call.
const MaxAvailabilityRatios = 100

// ErrSkillNotFound reports that no server of the tenant offers a skill of
// that name.
var ErrSkillNotFound = errors.New("skill not found")

// ParseAvailabilityWindow returns the window named s; empty is the default.
func ParseAvailabilityWindow(s string) (AvailabilityWindow, error) {
	if s == "" {
		return DefaultAvailabilityWindow, nil
	}
	if w := AvailabilityWindow(s); slices.Contains(AvailabilityWindows, w) {
		return w, nil
	}
	return "", fmt.Errorf("unknown window %q: want one of 1h, 24h, 7d, 30d", s)
}

// Duration is the length of the window; zero for an unknown window.
func (w AvailabilityWindow) Duration() time.Duration {
	switch w {
	case Window1h:
		return time.Hour
	case Window24h:
		return 24 * time.Hour
	case Window7d:
		return 7 * 24 * time.Hour
	case Window30d:
		return 30 * 24 * time.Hour
	}
	return 0
}

// AvailabilityRequest asks for availability over a window.
type AvailabilityRequest struct {
	Window AvailabilityWindow // empty: DefaultAvailabilityWindow
	// Now is the window's end; zero: the store's clock.
	Now time.Time
}

// Bounds returns the request's window and its start and end for a store
// whose clock shows now when the request does not say, in microseconds as
// stores keep time.
func (r AvailabilityRequest) Bounds(now time.Time) (w AvailabilityWindow, from, to time.Time) {
	w = r.Window
	if w == "" {
		w = DefaultAvailabilityWindow
	}
	to = now
	if !r.Now.IsZero() {
		to = r.Now
	}
	to = to.UTC().Truncate(time.Microsecond)
	return w, to.Add(-w.Duration()), to
}

// StatusSeconds is the time spent in each status, in seconds.
type StatusSeconds struct {
	Healthy      float64 `json:"healthy"`
	Degraded     float64 `json:"degraded"`
	Unhealthy    float64 `json:"unhealthy"`
	Deregistered float64 `json:"deregistered"`
}

// Outage is a span of the window in which a server was unhealthy or
// deregistered (a skill: no provider available).
type Outage struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Status Status    `json:"status"`
}

// Availability is what a server or skill delivered over a window, from the
// audit trail: the time observed (from registration, or the window's start
// when earlier, to its end), the share of it available (healthy or
// degraded), the time in each status, the outages newest first (at most
// MaxOutages) and the number of transitions in the window.
type Availability struct {
	Window          AvailabilityWindow `json:"window"`
	From            time.Time          `json:"from"`
	To              time.Time          `json:"to"`
	ObservedSeconds float64            `json:"observed_seconds"`
	// AvailableRatio is nil when nothing of the window was observed.
	AvailableRatio *float64      `json:"available_ratio"`
	Seconds        StatusSeconds `json:"seconds"`
	Outages        []Outage      `json:"outages"`
	Transitions    int           `json:"transitions"`
}

// AvailabilityRatio is one server's available share of a window, for lists.
type AvailabilityRatio struct {
	ServerID        uuid.UUID `json:"server_id"`
	ObservedSeconds float64   `json:"observed_seconds"`
	// AvailableRatio is nil when nothing of the window was observed.
	AvailableRatio *float64 `json:"available_ratio"`
}

// Ratio returns available/observed, both in microseconds, rounded down to
// five decimals (so that any outage shows below 1), or nil when observed is
// zero. Every surface shows this one figure.
func Ratio(available, observed int64) *float64 {
	if observed <= 0 {
		return nil
	}
	if available >= observed {
		r := 1.0
		return &r
	}
	if available > math.MaxInt64/100000 {
		r := math.Floor(float64(available)/float64(observed)*100000) / 100000
		return &r
	}
	// Integer arithmetic: no float rounding lifts an outage back to 1.
	r := float64(available*100000/observed) / 100000
	return &r
}

// Seconds converts microseconds to seconds.
func Seconds(us int64) float64 { return float64(us) / 1e6 }

// Change is one transition of a timeline: from At on, the status is To.
type Change struct {
	At time.Time
	To Status
}

// Timeline is one server's statuses around a window, from its audit
// trail: Start is its status at the window's start (empty: not registered
// yet), Changes the transitions in the window, in commit order.
type Timeline struct {
	Start   Status
	Changes []Change
}

// span is a stretch of the window in one status.
type span struct {
	from, to int64 // microseconds
	status   Status
}

// ServerAvailability computes a server's availability over [from, to]
// from its timeline: the reference every store's figures equal.
func ServerAvailability(w AvailabilityWindow, from, to time.Time, tl Timeline) Availability {
	f, t := from.UnixMicro(), to.UnixMicro()
	var spans []span
	cur, at := tl.Start, f
	for _, c := range tl.Changes {
		c.At = clampTime(c.At, from, to)
		if cur != "" && c.At.UnixMicro() > at {
			spans = append(spans, span{at, c.At.UnixMicro(), cur})
		}
		cur, at = c.To, c.At.UnixMicro()
	}
	if cur != "" && t > at {
		spans = append(spans, span{at, t, cur})
	}
	return summarize(w, from, to, spans, len(tl.Changes))
}

// SkillAvailability computes a skill's availability over [from, to] from
// the timelines of the servers that offer it: at each moment its status is
// the best of its providers' (healthy, degraded, unhealthy, deregistered);
// a deregistered provider counts only while no other is registered, and
// the time before any provider registered is not observed. Transitions
// counts the changes of that status.
func SkillAvailability(w AvailabilityWindow, from, to time.Time, tls []Timeline) Availability {
	type point struct {
		at       int64
		provider int
		to       Status
		order    int
	}
	var points []point
	cur := make([]Status, len(tls))
	for i, tl := range tls {
		cur[i] = tl.Start
		for j, c := range tl.Changes {
			points = append(points, point{clampTime(c.At, from, to).UnixMicro(), i, c.To, j})
		}
	}
	slices.SortStableFunc(points, func(a, b point) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.provider, b.provider), cmp.Compare(a.order, b.order))
	})
	best := func() Status {
		var out Status
		for _, s := range cur {
			if s != "" && (out == "" || statusRank(s) < statusRank(out)) {
				out = s
			}
		}
		return out
	}
	var spans []span
	f, t := from.UnixMicro(), to.UnixMicro()
	status, at, transitions := best(), f, 0
	for i := 0; i < len(points); {
		p := points[i].at
		for ; i < len(points) && points[i].at == p; i++ {
			cur[points[i].provider] = points[i].to
		}
		next := best()
		if next == status {
			continue
		}
		if status != "" && p > at {
			spans = append(spans, span{at, p, status})
		}
		status, at = next, p
		transitions++
	}
	if status != "" && t > at {
		spans = append(spans, span{at, t, status})
	}
	return summarize(w, from, to, spans, transitions)
}

// statusRank orders statuses from the most available.
func statusRank(s Status) int {
	return slices.Index(Statuses, s)
}

func clampTime(at, from, to time.Time) time.Time {
	if at.Before(from) {
		return from
	}
	if at.After(to) {
		return to
	}
	return at
}

// summarize makes an Availability of the spans, oldest first.
func summarize(w AvailabilityWindow, from, to time.Time, spans []span, transitions int) Availability {
	var us [4]int64
	for _, s := range spans {
		if i := statusRank(s.status); i >= 0 {
			us[i] += s.to - s.from
		}
	}
	var outages []Outage
	for i := len(spans) - 1; i >= 0; i-- {
		if s := spans[i]; s.status == StatusUnhealthy || s.status == StatusDeregistered {
			outages = append(outages, Outage{From: time.UnixMicro(s.from).UTC(), To: time.UnixMicro(s.to).UTC(), Status: s.status})
		}
	}
	return NewAvailability(w, from, to, us, MergeOutages(outages), transitions)
}

// MergeOutages joins the outages (newest first) of one status that follow
// each other with no time between them, such as a deregistration, a
// registration and a deregistration again in the same microsecond, and
// keeps the newest MaxOutages.
func MergeOutages(outages []Outage) []Outage {
	out := []Outage{}
	for _, o := range outages {
		if n := len(out); n > 0 && out[n-1].Status == o.Status && out[n-1].From.Equal(o.To) {
			out[n-1].From = o.From
			continue
		}
		if len(out) == MaxOutages {
			break
		}
		out = append(out, o)
	}
	return out
}

// NewAvailability assembles an Availability from the microseconds spent in
// each status (in the order of Statuses), the outages newest first and
// the transitions.
func NewAvailability(w AvailabilityWindow, from, to time.Time, us [4]int64, outages []Outage, transitions int) Availability {
	observed := us[0] + us[1] + us[2] + us[3]
	if outages == nil {
		outages = []Outage{}
	}
	return Availability{
		Window: w, From: from.UTC(), To: to.UTC(),
		ObservedSeconds: Seconds(observed),
		AvailableRatio:  Ratio(us[0]+us[1], observed),
		Seconds: StatusSeconds{
			Healthy: Seconds(us[0]), Degraded: Seconds(us[1]),
			Unhealthy: Seconds(us[2]), Deregistered: Seconds(us[3]),
		},
		Outages:     outages,
		Transitions: transitions,
	}
}
