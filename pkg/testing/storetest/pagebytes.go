package storetest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cyberos/mcpd/pkg/registry"
)

// A page of servers is bounded by the bytes of their capability
// advertisements as well as by count.
var pageBytesCases = []testCase{
	{"servers_page_bytes", serversPageBytes},
	{"servers_page_bytes_default", serversPageBytesDefault},
}

// bigCaps is a capability advertisement of about size bytes.
func bigCaps(size int) json.RawMessage {
	return json.RawMessage(`{"tools":{"listChanged":true},"blob":"` + strings.Repeat("x", size) + `"}`)
}

// walkAll pages through f and returns the pages' module names.
func (e *env) walkAll(f registry.ServerFilter) [][]string {
	e.t.Helper()
	var pages [][]string
	for range 200 {
		page, err := e.store.Servers(e.ctx, e.tenant, f)
		if err != nil {
			e.t.Fatalf("servers %+v: %v", f, err)
		}
		names := []string{}
		for _, s := range page.Servers {
			names = append(names, s.ModuleName)
		}
		pages = append(pages, names)
		if page.Next == nil {
			return pages
		}
		if len(page.Servers) == 0 {
			e.t.Fatalf("an empty page with a next cursor")
		}
		f.After = page.Next
	}
	e.t.Fatalf("servers: no last page after 200 pages")
	return nil
}

// everyOnce checks that pages hold want's modules, each exactly once, in
// order.
func (e *env) everyOnce(pages [][]string, want []string) {
	e.t.Helper()
	var got []string
	for _, p := range pages {
		got = append(got, p...)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		e.t.Fatalf("paged through %v, want each of %v once", pages, want)
	}
}

// With a budget of 3.5 servers' advertisements, a page holds 4 servers
// (it ends after the server that reaches the budget), whatever its limit.
func serversPageBytes(e *env) {
	const size = 10_000
	var want []string
	for i := range 10 {
		info := e.info(fmt.Sprintf("mod-%02d", i))
		info.CapabilityAdvertisement = bigCaps(size)
		e.registerNew(info)
		want = append(want, info.ModuleName)
	}
	small := e.info("mod-05a") // no advertisement: costs nothing
	small.CapabilityAdvertisement = nil
	e.registerNew(small)
	want = append(want[:6], append([]string{"mod-05a"}, want[6:]...)...)

	pages := e.walkAll(registry.ServerFilter{Limit: 100, MaxBytes: size*3 + size/2})
	sizes := []int{}
	for _, p := range pages {
		sizes = append(sizes, len(p))
	}
	if fmt.Sprint(sizes) != "[4 5 2]" {
		e.t.Fatalf("page sizes %v (%v), want [4 5 2]: 4 servers reach the budget, the one without advertisement is free",
			sizes, pages)
	}
	e.everyOnce(pages, want)
	// The count still bounds the page.
	e.everyOnce(e.walkAll(registry.ServerFilter{Limit: 3, MaxBytes: size * 100}), want)
	// A budget below one server still moves on: one server per page.
	pages = e.walkAll(registry.ServerFilter{Limit: 100, MaxBytes: 1})
	if len(pages) != 10 { // mod-05a, which costs nothing, shares the page of mod-06
		e.t.Fatalf("%d pages at a budget of 1 byte, want 10: %v", len(pages), pages)
	}
	e.everyOnce(pages, want)
	// A filter pages the same way.
	e.everyOnce(e.walkAll(registry.ServerFilter{Status: registry.StatusHealthy, Limit: 100, MaxBytes: size}), want)
}

// At the default budget (MaxPageBytes), 30 servers of 200 KB come in pages
// shorter than the default limit, each server once, and the advertisements
// come back whole.
func serversPageBytesDefault(e *env) {
	const size = 200_000
	var want []string
	for i := range 30 {
		info := e.info(fmt.Sprintf("big-%02d", i))
		info.CapabilityAdvertisement = bigCaps(size)
		e.registerNew(info)
		want = append(want, info.ModuleName)
	}
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: registry.MaxPageLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	if n := len(page.Servers); n >= 30 || n < registry.MaxPageBytes/(size+100) || page.Next == nil {
		e.t.Fatalf("first page: %d servers, next %v; want about %d and a next cursor", n, page.Next,
			registry.MaxPageBytes/size)
	}
	total := 0
	for _, s := range page.Servers {
		var v struct{ Blob string }
		if err := json.Unmarshal(s.CapabilityAdvertisement, &v); err != nil || len(v.Blob) != size {
			e.t.Fatalf("%s: advertisement of %d bytes, blob %d: %v", s.ModuleName, len(s.CapabilityAdvertisement), len(v.Blob), err)
		}
		total += len(s.CapabilityAdvertisement)
	}
	if total > registry.MaxPageBytes+size+1000 {
		e.t.Fatalf("first page holds %d bytes of advertisements, want at most %d + one server", total, registry.MaxPageBytes)
	}
	e.everyOnce(e.walkAll(registry.ServerFilter{Limit: registry.MaxPageLimit}), want)
}
