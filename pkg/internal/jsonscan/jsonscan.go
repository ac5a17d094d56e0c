// Package jsonscan walks JSON text already known to be valid, for mcpd's
// two strict readers: request bodies (pkg/api, decode.go) and the header
// and claims of a token (pkg/auth, strict.go). Each reader keeps its own
// rules; the walk is here, once.
//
// The standard library does not do their job: encoding/json keeps the last
// of two members of the same name where the contract refuses the request,
// matches member names without regard to case, and replaces invalid UTF-8
// and lone surrogate escapes with U+FFFD, so its decoding can only come
// after a walk that sees the text as sent. encoding/json/v2, which refuses
// duplicate names and invalid Unicode, is not in the standard library
// without GOEXPERIMENT=jsonv2, stops at its first error wherever in the
// text (the readers name the first fault in document order, unknown or
// repeated members before wrong types), names members by JSON Pointer
// (/skills/2/name, not skills[2].name) and does not refuse two names that
// differ only in case, which a token must not hold.
package jsonscan

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads valid JSON text (json.Valid) from Pos on. Its methods
// assume the text is valid: on any other they return without a panic but
// say nothing useful.
type Scanner struct {
	Data []byte
	Pos  int
}

// SkipSpace advances past JSON white space.
func (s *Scanner) SkipSpace() {
	for s.Pos < len(s.Data) {
		switch s.Data[s.Pos] {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Peek returns the first byte of the next value, after white space: '{',
// '[', '"' or the first of a number or literal; 0 at the end of the text.
func (s *Scanner) Peek() byte {
	s.SkipSpace()
	if s.Pos >= len(s.Data) {
		return 0
	}
	return s.Data[s.Pos]
}

// Enter advances into the object or array at Pos, past its '{' or '['.
func (s *Scanner) Enter() {
	s.SkipSpace()
	s.Pos++
}

// Member advances past the next member name of the object being read and
// its colon, and returns the name's literal, quotes included; at the
// object's end it advances past the '}' and returns false.
func (s *Scanner) Member() (name []byte, ok bool) {
	if !s.next('}') {
		return nil, false
	}
	start := s.Pos
	s.skipString()
	name = s.Data[start:s.Pos]
	s.SkipSpace()
	s.Pos++ // :
	return name, true
}

// Element advances to the next element of the array being read and
// reports true; at the array's end it advances past the ']' and returns
// false.
func (s *Scanner) Element() bool {
	return s.next(']')
}

// next advances past white space and a comma to the next member or
// element, or past end and reports false.
func (s *Scanner) next(end byte) bool {
	s.SkipSpace()
	if s.Pos >= len(s.Data) {
		return false
	}
	switch s.Data[s.Pos] {
	case end:
		s.Pos++
		return false
	case ',':
		s.Pos++
		s.SkipSpace()
	}
	return true
}

// Value advances past the next value and returns its text.
func (s *Scanner) Value() []byte {
	s.SkipSpace()
	start := s.Pos
	depth := 0
	for s.Pos < len(s.Data) {
		switch s.Data[s.Pos] {
		case '"':
			s.skipString()
			if depth == 0 {
				return s.Data[start:s.Pos]
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return s.Data[start:s.Pos] // the end of a number or literal
			}
			depth--
			if depth == 0 {
				s.Pos++
				return s.Data[start:s.Pos]
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.Data[start:s.Pos] // the end of a number or literal
			}
		}
		s.Pos++
	}
	return s.Data[start:s.Pos]
}

// skipString advances past the string literal at Pos.
func (s *Scanner) skipString() {
	for s.Pos++; s.Pos < len(s.Data) && s.Data[s.Pos] != '"'; s.Pos++ {
		if s.Data[s.Pos] == '\\' {
			s.Pos++
		}
	}
	s.Pos++
}

// Why a string is not valid Unicode.
var (
	// ErrInvalidUTF8: the string holds bytes that are not UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrLoneSurrogate: the string holds an escape of half a surrogate
	// pair ("\ud800") without its other half.
	ErrLoneSurrogate = errors.New("lone surrogate escape")
)

// String returns the value of the string literal lit (quotes included, of
// valid JSON text) as encoding/json decodes it, and ErrInvalidUTF8 or
// ErrLoneSurrogate when it is not valid Unicode (the value then holds
// U+FFFD in its place).
func String(lit []byte) (value string, bad error) {
	escaped := false
	for i := 1; i < len(lit)-1; {
		b := lit[i]
		switch {
		case b == '\\':
			escaped = true
			if lit[i+1] != 'u' {
				i += 2
				continue
			}
			if r, ok := hex4(lit, i+2); ok && utf16.IsSurrogate(r) {
				r2, ok2 := rune(0), false
				if i+7 < len(lit) && lit[i+6] == '\\' && lit[i+7] == 'u' {
					r2, ok2 = hex4(lit, i+8)
				}
				if r >= 0xDC00 || !ok2 || r2 < 0xDC00 || r2 > 0xDFFF {
					bad = ErrLoneSurrogate
				} else {
					i += 6 // the pair's first half
				}
			}
			i += 6
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(lit[i:])
			if r == utf8.RuneError && size == 1 {
				bad = ErrInvalidUTF8
			}
			i += size
		}
	}
	if !escaped && bad == nil {
		return string(lit[1 : len(lit)-1]), nil
	}
	_ = json.Unmarshal(lit, &value)
	return value, bad
}

// hex4 reads the four hex digits of a \u escape at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
	return rune(n), err == nil
}
