// Package termguard keeps mcpctl from asking the terminal for its colours
// while the program starts.
//
// bubbletea v1 asks, in its init, for the terminal's background colour
// (through lipgloss and termenv: an OSC 11 query followed by a cursor
// position request) and waits up to 5 s for the answer. Under script(1), a
// CI log or any terminal that does not answer, every mcpctl command, a
// plain `servers list` included, stalled 5 s and printed the query;
// NO_COLOR did not help. mcpctl needs no answer (its colours are the
// terminal's own ANSI ones), so this package, which depends on nothing
// but syscall and is therefore initialised before bubbletea, sets
// TERM=dumb (on which termenv never asks) for the length of the
// initialisation, and Restore puts TERM back before mcpctl does anything.
package termguard
