package registry_test

import (
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
)

func TestTraceIDFromTraceparent(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	cases := []struct {
		name, header, want string
	}{
		{"w3c example", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", id},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", id},
		{"surrounding spaces", "  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\t", id},
		{"future version", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", id},
		{"future version, more fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be", id},
		{"empty", "", ""},
		{"garbage", "hello", ""},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"version not hex", "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"version one digit", "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"version 00 with more fields", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", ""},
		{"uppercase trace id", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
		{"uppercase parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01", ""},
		{"all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"all-zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},
		{"short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", ""},
		{"long trace id", "00-4bf92f3577b34da6a3ce929d0e0e47360-00f067aa0ba902b7-01", ""},
		{"short parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01", ""},
		{"trace id not hex", "00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01", ""},
		{"no flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", ""},
		{"flags one digit", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", ""},
		{"flags not hex", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", ""},
		{"underscores", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", ""},
		{"trace id alone", id, ""},
	}
	for _, c := range cases {
		if got := registry.TraceIDFromTraceparent(c.header); got != c.want {
			t.Errorf("%s: TraceIDFromTraceparent(%q) = %q, want %q", c.name, c.header, got, c.want)
		}
	}
}

func TestNewTraceID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := registry.NewTraceID()
		if !registry.ValidTraceID(id) {
			t.Fatalf("NewTraceID() = %q, not 32 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewTraceID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestValidTraceID(t *testing.T) {
	for s, want := range map[string]bool{
		"4bf92f3577b34da6a3ce929d0e0e4736":  true,
		"00000000000000000000000000000001":  true,
		strings.Repeat("0", 32):             false,
		"4BF92F3577B34DA6A3CE929D0E0E4736":  false,
		"4bf92f3577b34da6a3ce929d0e0e473":   false,
		"4bf92f3577b34da6a3ce929d0e0e47361": false,
		"4bf92f3577b34da6a3ce929d0e0e473g":  false,
		"":                                  false,
	} {
		if got := registry.ValidTraceID(s); got != want {
			t.Errorf("ValidTraceID(%q) = %v, want %v", s, got, want)
		}
	}
}
