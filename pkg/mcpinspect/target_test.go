package mcpinspect

import (
	"errors"
	"slices"
	"testing"
)

func TestParseCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"node server.js", []string{"node", "server.js"}},
		{"  node\tserver.js  stdio \n", []string{"node", "server.js", "stdio"}},
		{`python3 -m "my server" --name 'a b'`, []string{"python3", "-m", "my server", "--name", "a b"}},
		{`echo 'it''s'`, []string{"echo", "its"}},
		{`a "x\"y" 'x\"y'`, []string{"a", `x"y`, `x\"y`}},
		{`a \$HOME $HOME * | > ;`, []string{"a", "$HOME", "$HOME", "*", "|", ">", ";"}},
		{`a b\ c ""`, []string{"a", "b c", ""}},
		{"a \"\\\\ \\n\"", []string{"a", `\ \n`}},
		{"a \\\nb", []string{"a", "b"}},
		{`a pre"mid"'post'`, []string{"a", "premidpost"}},
		{`trailing\`, []string{`trailing\`}},
		{"名前 'ü b'", []string{"名前", "ü b"}},
	} {
		got, err := ParseCommand(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseCommand(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "   ", `a "b`, `a 'b`, `'`} {
		if got, err := ParseCommand(in); err == nil {
			t.Errorf("ParseCommand(%q) = %q, want an error", in, got)
		}
	}
	if _, err := ParseCommand(`a "b`); !errors.Is(err, errUnclosedQuote) {
		t.Errorf("unterminated quote: %v", err)
	}
}

func TestTargetValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t  Target
		ok bool
	}{
		{Target{URL: "http://127.0.0.1:3000/mcp"}, true},
		{Target{URL: "https://mcp.example.com"}, true},
		{Target{Command: []string{"node", "x.js"}}, true},
		{Target{}, false},
		{Target{URL: "http://a", Command: []string{"b"}}, false},
		{Target{URL: "ftp://a/b"}, false},
		{Target{URL: "/mcp"}, false},
		{Target{Command: []string{" "}}, false},
	} {
		if err := c.t.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", c.t, err, c.ok)
		}
	}
	if s := (Target{URL: "http://user:secret@127.0.0.1/mcp"}).String(); s != "http://127.0.0.1/mcp" {
		t.Errorf("String() = %q: the user information must not show", s)
	}
}
