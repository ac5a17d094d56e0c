package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cyberos/mcpd/pkg/registry"
)

// EventStream prints audit events one at a time, as they arrive: on a
// terminal rows in fixed-width columns under a header printed once, piped
// tab-separated rows, in json one compact object a line (NDJSON), in yaml
// one document each, separated by "---".
type EventStream struct {
	p      *Printer
	header bool // printed
}

// EventStream returns a stream printer over p.
func (p *Printer) EventStream() *EventStream { return &EventStream{p: p} }

// Widths of the streamed table's columns, each with its gap; a longer cell
// pushes the rest of its row to the right.
var (
	streamWidths     = []int{22, 26, 26, 15, 15}
	streamWideWidths = []int{22, 39, 26, 39, 26, 15, 15, 35, 0}
)

// Event prints one event.
func (s *EventStream) Event(e registry.Event) error {
	p := s.p
	switch f := p.format(); f {
	case JSON:
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		_, err = p.Out.Write(append(b, '\n'))
		return err
	case YAML:
		// One write per event, so that a reader never sees half of one.
		var b bytes.Buffer
		b.WriteString("---\n")
		if err := WriteYAML(&b, e); err != nil {
			return err
		}
		_, err := p.Out.Write(b.Bytes())
		return err
	}
	wide := p.format() == Wide
	from := ""
	if e.FromStatus != nil {
		from = string(*e.FromStatus)
	}
	fromCell := from
	if from == "" && p.Terminal {
		fromCell = "-"
	}
	// Times are timestamps on a terminal too: an age is stale at once.
	row := []string{Timestamp(e.OccurredAt), string(e.Kind), e.ModuleName, fromCell, string(e.ToStatus)}
	header := []string{"OCCURRED", "KIND", "MODULE", "FROM", "TO"}
	widths, fromCol := streamWidths, 3
	if wide {
		row = []string{
			Timestamp(e.OccurredAt), e.EventID.String(), string(e.Kind), e.ServerID.String(), e.ModuleName,
			fromCell, string(e.ToStatus), e.TraceID, strings.Join(e.Body.SkillsAffected, ","),
		}
		header = []string{"OCCURRED", "EVENT ID", "KIND", "SERVER ID", "MODULE", "FROM", "TO", "TRACE ID", "SKILLS AFFECTED"}
		widths, fromCol = streamWideWidths, 5
	}
	if !p.Terminal {
		for i, c := range row {
			row[i] = Escape(c)
		}
		_, err := fmt.Fprintln(p.Out, strings.Join(row, "\t"))
		return err
	}
	var b strings.Builder
	if !s.header {
		b.WriteString(padRow(header, widths, nil))
		s.header = true
	}
	colors := make([]string, len(row))
	if p.Color {
		colors[fromCol] = statusColor(registry.Status(from))
		colors[fromCol+1] = statusColor(e.ToStatus)
	}
	b.WriteString(padRow(row, widths, colors))
	_, err := io.WriteString(p.Out, b.String())
	return err
}

// padRow joins cells, each padded to its width (at least one space after
// it), colouring the text but not the padding, without trailing blanks.
func padRow(cells []string, widths []int, colors []string) string {
	var b strings.Builder
	for i, c := range cells {
		c = Escape(c)
		text := c
		if colors != nil && colors[i] != "" {
			text = paint(colors[i], c)
		}
		b.WriteString(text)
		if i < len(cells)-1 {
			pad := 1
			if i < len(widths) {
				pad = max(widths[i]-len([]rune(c)), 1)
			}
			b.WriteString(strings.Repeat(" ", pad))
		}
	}
	return strings.TrimRight(b.String(), " ") + "\n"
}
