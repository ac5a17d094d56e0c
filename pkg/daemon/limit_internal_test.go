package daemon

import (
	"errors"
	"strings"
	"testing"
)

func TestFitConnections(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		want      int
		isDefault bool
		limit     uint64
		got       int
		err       string
	}{
		{"fits the unit's limit", 60000, true, 65536, 60000, ""},
		{"default lowered", 60000, true, 4096, 4096 - 300, ""},
		{"given refused", 5000, false, 4096, 0, "lower it to at most 3796"},
		{"given fits", 1000, false, 4096, 1000, ""},
		{"no room at all", 10, false, 200, 0, "leaves no room"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := fitConnections(c.want, c.isDefault, c.limit, 300)
			if c.err != "" {
				var ce *connectionLimitError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want a connectionLimitError saying %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.got {
				t.Fatalf("got %d, %v; want %d", got, err, c.got)
			}
		})
	}
}

func TestOpenFileLimitRaised(t *testing.T) {
	t.Parallel()
	limit, err := openFileLimit()
	if err != nil {
		t.Skip(err)
	}
	if limit < 1024 {
		t.Fatalf("open-file limit %d after raising it to the hard limit", limit)
	}
}
