package registry_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/registry"
)

func TestParseAvailabilityWindow(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"": 24 * time.Hour, "1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour} {
		w, err := registry.ParseAvailabilityWindow(in)
		if err != nil || w.Duration() != want {
			t.Errorf("%q: %q (%s), %v; want %s", in, w, w.Duration(), err, want)
		}
	}
	for _, in := range []string{"2h", "1d", "24H", "60m", " 1h", "30"} {
		if w, err := registry.ParseAvailabilityWindow(in); err == nil {
			t.Errorf("%q: %q, want an error", in, w)
		}
	}
}

// TestRatio: rounded down to five decimals, so that any unavailable time
// shows below 1; nil when nothing was observed.
func TestRatio(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		available, observed int64
		want                float64
	}{
		{86_400_000_000, 86_400_000_000, 1},
		{86_399_999_999, 86_400_000_000, 0.99999},
		{86_340_000_000, 86_400_000_000, 0.99930},
		{1, 3, 0.33333},
		{2, 3, 0.66666},
		{0, 5, 0},
		{30 * 86_400_000_000, 30 * 86_400_000_000, 1},
	} {
		if got := registry.Ratio(c.available, c.observed); got == nil || *got != c.want {
			t.Errorf("Ratio(%d, %d) = %v, want %v", c.available, c.observed, got, c.want)
		}
	}
	if got := registry.Ratio(0, 0); got != nil {
		t.Errorf("Ratio(0, 0) = %v, want nil", *got)
	}
}

// TestSkillAvailabilityBestProvider: the skill is as good as its best
// provider; a deregistered one is left out while another is registered;
// nothing is observed before the first provider registered.
func TestSkillAvailabilityBestProvider(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return from.Add(time.Duration(m) * time.Minute) }
	a := registry.Timeline{Changes: []registry.Change{
		{At: at(10), To: registry.StatusHealthy},
		{At: at(20), To: registry.StatusDeregistered},
		{At: at(40), To: registry.StatusHealthy},
	}}
	b := registry.Timeline{Start: registry.StatusUnhealthy, Changes: []registry.Change{
		{At: at(30), To: registry.StatusHealthy},
		{At: at(50), To: registry.StatusDeregistered},
	}}
	got := registry.SkillAvailability(registry.Window1h, from, at(60), []registry.Timeline{a, b})
	// 0-10 unhealthy (b), 10-20 healthy (a), 20-30 unhealthy (b; a is
	// deregistered and left out), 30-60 healthy.
	want := registry.NewAvailability(registry.Window1h, from, at(60), [4]int64{40 * 60e6, 0, 20 * 60e6, 0},
		[]registry.Outage{{From: at(20), To: at(30), Status: registry.StatusUnhealthy}, {From: at(0), To: at(10), Status: registry.StatusUnhealthy}}, 3)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// Both deregistered: the skill is.
	c := registry.Timeline{Start: registry.StatusHealthy, Changes: []registry.Change{{At: at(45), To: registry.StatusDeregistered}}}
	got = registry.SkillAvailability(registry.Window1h, from, at(60), []registry.Timeline{c, {Changes: []registry.Change{{At: at(50), To: registry.StatusHealthy}, {At: at(55), To: registry.StatusDeregistered}}}})
	if got.Seconds.Deregistered != 10*60 || got.Seconds.Healthy != 50*60 || len(got.Outages) != 2 || got.Outages[0].Status != registry.StatusDeregistered {
		t.Fatalf("every provider deregistered: %+v", got)
	}
	// No provider before 10: not observed.
	got = registry.SkillAvailability(registry.Window1h, from, at(60), []registry.Timeline{a})
	if got.ObservedSeconds != 50*60 {
		t.Fatalf("observed %v, want 3000 (from the registration)", got.ObservedSeconds)
	}
}

func TestMergeOutages(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	in := []registry.Outage{
		{From: at(20), To: at(30), Status: registry.StatusDeregistered},
		{From: at(10), To: at(20), Status: registry.StatusDeregistered},
		{From: at(5), To: at(10), Status: registry.StatusUnhealthy},
	}
	want := []registry.Outage{
		{From: at(10), To: at(30), Status: registry.StatusDeregistered},
		{From: at(5), To: at(10), Status: registry.StatusUnhealthy},
	}
	if got := registry.MergeOutages(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	var many []registry.Outage
	for i := 300; i > 0; i-- {
		many = append(many, registry.Outage{From: at(2 * i), To: at(2*i + 1), Status: registry.StatusUnhealthy})
	}
	if got := registry.MergeOutages(many); len(got) != registry.MaxOutages || !got[0].From.Equal(at(600)) {
		t.Fatalf("%d outages, the first from %s; want the newest %d", len(got), got[0].From, registry.MaxOutages)
	}
}
