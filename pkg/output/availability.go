package output

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Percent is an available ratio as people read it, with the three
// decimals the ratio carries ("99.931%"); "-" when nothing was observed.
// The TUI and the web board show the same text.
func Percent(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r*100, 'f', 3, 64) + "%"
}

// ratioCell is a ratio in a table: a percentage on a terminal, the ratio
// itself piped (empty when nothing was observed).
func (p *Printer) ratioCell(r *float64) string {
	if p.Terminal {
		return Percent(r)
	}
	if r == nil {
		return ""
	}
	return strconv.FormatFloat(*r, 'f', -1, 64)
}

// seconds is a duration in seconds: rounded for people on a terminal, the
// number piped.
func (p *Printer) seconds(s float64) string {
	if p.Terminal {
		return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
	}
	return strconv.FormatFloat(s, 'f', -1, 64)
}

// Availability prints what a server or skill delivered over a window: its
// figures one a line, then its outages, newest first, as a table.
func (p *Printer) Availability(a registry.Availability) error {
	f := p.format()
	if f.Structured() {
		return Write(p.Out, f, a)
	}
	fields := []field{
		{"Window", "window", Escape(string(a.Window))},
		{"From", "from", Timestamp(a.From)},
		{"To", "to", Timestamp(a.To)},
		{"Available", "available_ratio", p.ratioCell(a.AvailableRatio)},
		{"Observed", "observed_seconds", p.seconds(a.ObservedSeconds)},
		{"Healthy", "seconds.healthy", p.seconds(a.Seconds.Healthy)},
		{"Degraded", "seconds.degraded", p.seconds(a.Seconds.Degraded)},
		{"Unhealthy", "seconds.unhealthy", p.seconds(a.Seconds.Unhealthy)},
		{"Deregistered", "seconds.deregistered", p.seconds(a.Seconds.Deregistered)},
		{"Transitions", "transitions", strconv.Itoa(a.Transitions)},
		{"Outages", "outages", strconv.Itoa(len(a.Outages))},
	}
	if err := p.fields(fields); err != nil {
		return err
	}
	if len(a.Outages) == 0 {
		return nil
	}
	rows := make([][]string, len(a.Outages))
	for i, o := range a.Outages {
		rows[i] = []string{Timestamp(o.From), Timestamp(o.To), p.seconds(o.To.Sub(o.From).Seconds()), p.status(o.Status)}
	}
	if p.Terminal {
		if _, err := fmt.Fprintln(p.Out); err != nil {
			return err
		}
	}
	return WriteTable(p.Out, p.Terminal, p.header([]string{"OUTAGE FROM", "TO", "DURATION", "STATUS"}), rows)
}

// availabilityCell is a server's ratio in a list (-o wide); "-" on a
// terminal when ratios is nil or lacks it.
func (p *Printer) availabilityCell(ratios map[uuid.UUID]registry.AvailabilityRatio, id uuid.UUID) string {
	r, ok := ratios[id]
	if !ok {
		return p.dash("")
	}
	return p.ratioCell(r.AvailableRatio)
}
