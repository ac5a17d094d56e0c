package main

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestBadUsageExits2(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-clients", "0"}, "-clients must be at least 1"},
		{[]string{"-pgbench-clients", "8,x"}, `"x" is not a positive number`},
		{[]string{"-fleet", "1000,0"}, `-fleet: "0" is not a positive number`},
		{[]string{"-fleet", "1000", "-fleet-duration", "5s"}, "-fleet-duration must be in [10s, 5m]"},
		{[]string{"-citus-only", "-citus-servers", "0"}, "-citus-only needs -citus-servers above 0"},
		{[]string{"-citus-duration", "2m"}, "-citus-duration must be in (0, 1m]"},
		{[]string{"-citus-servers", "-1"}, "-citus-servers must be in [0, 100,000]"},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
		{[]string{"-serve-floor"}, "-serve-floor needs -floor-secret-file"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var out, errb strings.Builder
		if code := benchMain(context.Background(), c.args, &out, &errb); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (stderr %q)", c.args, code, errb.String())
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Fatalf("%v: stderr %q does not say %q", c.args, errb.String(), c.want)
		}
	}
	var out, errb strings.Builder
	if code := benchMain(context.Background(), []string{"-help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-duration") {
		t.Fatalf("-help: exit %d, stderr %q", code, errb.String())
	}
}

func TestParseInts(t *testing.T) {
	got, err := parseInts(" 8, 32 ,")
	if err != nil || !slices.Equal(got, []int{8, 32}) {
		t.Fatalf("parseInts = %v, %v", got, err)
	}
	if joinInts([]int{8, 32}) != "8,32" {
		t.Fatal("joinInts")
	}
}
