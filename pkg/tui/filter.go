package tui

import (
	"unicode"

	tea "github.com/charmbracelet/bubbletea"
)

// filterInput is the one-line editor of the module filter: printable runes
// are typed at the end, backspace deletes the last one, ctrl+u all of them.
type filterInput struct {
	styles styles
	value  []rune
	limit  int
	width  int
}

func newFilterInput(st styles) filterInput { return filterInput{styles: st, limit: 63} }

// Update edits the value on keys.
func (f filterInput) Update(msg tea.Msg) (filterInput, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return f, nil
	}
	switch k.Type {
	case tea.KeyBackspace, tea.KeyCtrlH:
		if len(f.value) > 0 {
			f.value = f.value[:len(f.value)-1]
		}
	case tea.KeyCtrlU:
		f.value = nil
	case tea.KeyRunes, tea.KeySpace:
		for _, r := range k.Runes {
			if unicode.IsPrint(r) && len(f.value) < f.limit {
				f.value = append(f.value, r)
			}
		}
	}
	return f, nil
}

// SetSize sets the cells the input may use.
func (f *filterInput) SetSize(width, _ int) { f.width = width }

// Value is the text typed so far.
func (f filterInput) Value() string { return string(f.value) }

// SetValue replaces the text.
func (f *filterInput) SetValue(s string) { f.value = []rune(s) }

// View renders the prompt, the text and a block cursor.
func (f filterInput) View() string {
	text := string(f.value)
	if f.width > 2 && len(f.value) > f.width-2 {
		text = string(f.value[len(f.value)-(f.width-2):])
	}
	return f.styles.bold.Render("/") + text + f.styles.selected.Render(" ")
}
