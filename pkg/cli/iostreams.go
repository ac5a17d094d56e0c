package cli

import (
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are a command's standard streams and whether each is a terminal.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	// InIsTerminal, OutIsTerminal and ErrIsTerminal report whether the
	// stream is a terminal; nil means it is not.
	InIsTerminal  func() bool
	OutIsTerminal func() bool
	ErrIsTerminal func() bool
}

// SystemIO returns the process's stdin, stdout and stderr.
func SystemIO() *IOStreams {
	return &IOStreams{
		In:            os.Stdin,
		Out:           os.Stdout,
		ErrOut:        os.Stderr,
		InIsTerminal:  isTerminal(os.Stdin),
		OutIsTerminal: isTerminal(os.Stdout),
		ErrIsTerminal: isTerminal(os.Stderr),
	}
}

func isTerminal(f *os.File) func() bool {
	tty := term.IsTerminal(int(f.Fd()))
	return func() bool { return tty }
}

func (s *IOStreams) inTTY() bool  { return s.InIsTerminal != nil && s.InIsTerminal() }
func (s *IOStreams) outTTY() bool { return s.OutIsTerminal != nil && s.OutIsTerminal() }
func (s *IOStreams) errTTY() bool { return s.ErrIsTerminal != nil && s.ErrIsTerminal() }
