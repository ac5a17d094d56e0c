package jsonscan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/internal/jsonscan"
)

// TestWalk: a Scanner gives an object's members and values, an array's
// elements, and the end of each, as they stand in the text.
func TestWalk(t *testing.T) {
	t.Parallel()
	sc := jsonscan.Scanner{Data: []byte(` { "a" : [1, {"b":"}"}, "c"] , "d":-1.5e3,"e" :null} `)}
	if sc.Peek() != '{' {
		t.Fatalf("Peek %q", sc.Peek())
	}
	sc.Enter()
	var got []string
	for {
		name, ok := sc.Member()
		if !ok {
			break
		}
		got = append(got, string(name)+"="+string(sc.Value()))
	}
	want := `"a"=[1, {"b":"}"}, "c"] "d"=-1.5e3 "e"=null`
	if strings.Join(got, " ") != want {
		t.Fatalf("members %q, want %q", strings.Join(got, " "), want)
	}
	if sc.Peek() != 0 {
		t.Fatalf("after the object: %q", sc.Data[sc.Pos:])
	}

	sc = jsonscan.Scanner{Data: []byte(`[ "x" , {} ,[] ,true ]`)}
	sc.Enter()
	got = got[:0]
	for sc.Element() {
		got = append(got, string(sc.Value()))
	}
	if strings.Join(got, "|") != `"x"|{}|[]|true` {
		t.Fatalf("elements %q", got)
	}
}

// TestString: a literal's value as encoding/json gives it, and why one
// that is not valid Unicode is not.
func TestString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lit, want string
		bad       error
	}{
		{`"plain"`, "plain", nil},
		{`"a\"b\\c\u00e9"`, "a\"b\\cé", nil},
		{`"\ud83d\ude00"`, "😀", nil},
		{`"\ud800"`, "\ufffd", jsonscan.ErrLoneSurrogate},
		{`"\udc00\ud800"`, "\ufffd\ufffd", jsonscan.ErrLoneSurrogate},
		{`"\ud800\u0041"`, "\ufffdA", jsonscan.ErrLoneSurrogate},
		{"\"a\xffb\"", "a\ufffdb", jsonscan.ErrInvalidUTF8},
	} {
		got, bad := jsonscan.String([]byte(c.lit))
		if got != c.want || !errors.Is(bad, c.bad) || (bad == nil) != (c.bad == nil) {
			t.Errorf("String(%s) = %q, %v; want %q, %v", c.lit, got, bad, c.want, c.bad)
		}
	}
}
