package output

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// columnGap separates the columns of a terminal table.
const columnGap = "   "

// WriteTable writes rows for a terminal (aligned columns under header, when
// header is not nil) or for a pipe (cells joined by one tab, no header).
// Tabs and line breaks inside a cell become spaces.
func WriteTable(w io.Writer, terminal bool, header []string, rows [][]string) error {
	for _, row := range rows {
		for i, cell := range row {
			row[i] = flatten(cell)
		}
	}
	if !terminal {
		bw := bufio.NewWriter(w)
		for _, row := range rows {
			if _, err := fmt.Fprintln(bw, strings.Join(row, "\t")); err != nil {
				return err
			}
		}
		return bw.Flush()
	}
	// Not text/tabwriter: it measures a cell by its runes, so a status's
	// colour codes would count as width and push the columns after it out
	// of line. tablewriter measures what the terminal shows (colour takes
	// no room, a wide character two); its borderless preset is the plain
	// layout of cli/cli's tables.
	var buf bytes.Buffer
	t := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Separators: tw.SeparatorsNone, Lines: tw.LinesNone},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithTrimSpace(tw.Off),
		tablewriter.WithPadding(tw.Padding{Left: "", Right: columnGap, Overwrite: true}),
	)
	if header != nil {
		t.Header(header)
	}
	for _, row := range rows {
		if err := t.Append(row); err != nil {
			return fmt.Errorf("table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	// The renderer pads the last column to its width too (no option of
	// its turns that off); people and diffs prefer lines without trailing
	// blanks.
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	bw := bufio.NewWriter(w)
	for sc.Scan() {
		if _, err := fmt.Fprintln(bw, strings.TrimRight(sc.Text(), " ")); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return bw.Flush()
}

// Escape makes text from the server safe to print on a terminal: tabs
// and line breaks become one space (a run of them too), and every other
// control character (C0, DEL, C1: terminal escapes), line or paragraph
// separator, bidirectional embedding, override or isolate, and byte of
// invalid UTF-8 is written as its escape (\x1b, \u202e, \xff), so that
// a row the server holds can neither move the cursor, clear the screen,
// recolour what follows nor reorder what a reader sees.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if escaped(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\t' || r == '\r' || r == '\n':
			if !space {
				b.WriteByte(' ')
			}
			space = true
			i += n
			continue
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x100 && escaped(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case escaped(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
		space = false
		i += n
	}
	return b.String()
}

// escaped reports whether Escape rewrites r.
func escaped(r rune) bool {
	switch {
	case r == utf8.RuneError, unicode.IsControl(r), r == '\u2028', r == '\u2029':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

func flatten(s string) string {
	if !strings.ContainsAny(s, "\t\r\n") {
		return s
	}
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\t' || r == '\r' || r == '\n' }), " ")
}
