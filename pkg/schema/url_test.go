package schema

import (
	"net/url"
	"testing"
)

func TestDriverURL(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"postgres://u:p@db.example:5432/mcpd?sslmode=disable", "pgx5://u:p@db.example:5432/mcpd?sslmode=disable"},
		{"postgresql://u@h/d", "pgx5://u@h/d"},
		{"POSTGRES://u@h/d", "pgx5://u@h/d"},
		{"pgx5://u@h/d", "pgx5://u@h/d"},
		{"  postgres://u@h/d\n", "pgx5://u@h/d"},
		{"host=127.0.0.1 port=5432 user=mcpd dbname=registry sslmode=disable",
			"pgx5://mcpd@/registry?host=127.0.0.1&port=5432&sslmode=disable"},
		{"host=/var/run/postgresql dbname=registry", "pgx5:///registry?host=%2Fvar%2Frun%2Fpostgresql"},
		{`user=a password='it\'s a secret' dbname = 'my db'`, "pgx5://a:it%27s%20a%20secret@/my%20db"},
		{`password=p@ss host=h`, "pgx5:///?host=h&password=p%40ss"},
		{`password=x://y host=h`, "pgx5:///?host=h&password=x%3A%2F%2Fy"},
	}
	for _, tt := range tests {
		got, err := driverURL(tt.in)
		if err != nil {
			t.Errorf("driverURL(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("driverURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDriverURLDSNRoundTrip(t *testing.T) {
	got, err := driverURL(`user=o\'neil password='a b\\c' dbname=x`)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if u.User.Username() != "o'neil" || pw != `a b\c` || u.Path != "/x" {
		t.Fatalf("parsed %q: user %q password %q path %q", got, u.User.Username(), pw, u.Path)
	}
}

func TestDriverURLRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"   ",
		"mysql://u@h/d",
		"host",
		"host=h user",
		"password='unterminated",
		"password='a'b",
		"=x",
	} {
		if got, err := driverURL(in); err == nil {
			t.Errorf("driverURL(%q) = %q, want an error", in, got)
		}
	}
}
