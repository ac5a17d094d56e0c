package api

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// FuzzDecodeCursor: no string makes cursor decoding panic; a cursor that
// is accepted is valid for its listing, belongs to one listing only, and
// encodes back to a cursor that decodes to the same position.
func FuzzDecodeCursor(f *testing.F) {
	b64 := base64.RawURLEncoding.EncodeToString
	id := uuid.MustParse("6f1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e")
	seq := int64(42)
	for _, s := range []string{
		*encodeServerCursor(&heartbeat.ServerCursor{ModuleName: "calendar", ServerID: id}),
		*encodeEventCursor(&seq),
		"", "e30", "%%", "====", "bm90LWpzb24", strings.Repeat("A", maxCursorLen+1),
		b64([]byte(`{"k":"s","m":"a","i":"` + id.String() + `"}`)),
		b64([]byte(`{"k":"s","m":"A","i":"` + id.String() + `"}`)),
		b64([]byte(`{"k":"s","m":"a","i":"` + strings.ToUpper(id.String()) + `"}`)),
		b64([]byte(`{"k":"s","m":"a","i":"{` + id.String() + `}"}`)),
		b64([]byte(`{"k":"e","q":-1}`)), b64([]byte(`{"k":"e","q":0}`)),
		b64([]byte(`{"k":"e","q":9223372036854775807}`)), b64([]byte(`{"k":"e","q":9223372036854775808}`)),
		b64([]byte(`{"k":"e","q":1.5}`)), b64([]byte(`{"k":"e","q":"1"}`)), b64([]byte(`{"k":"x","q":1}`)),
		b64([]byte(`{"k":"s","k":"e","q":1}`)), b64([]byte(`{"k":"e","q":1,"m":"a"}`)), b64([]byte(`null`)),
		b64([]byte(`[]`)), base64.URLEncoding.EncodeToString([]byte(`{"k":"e","q":1}`)), // padded
		base64.StdEncoding.EncodeToString([]byte(`{"k":"e","q":1}`)),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, serr := decodeServerCursor(s)
		seq, eerr := decodeEventCursor(s)
		if serr == nil && eerr == nil {
			t.Fatalf("%q is a cursor of both listings", s)
		}
		if serr == nil {
			if sc == nil || !heartbeat.ValidModuleName(sc.ModuleName) {
				t.Fatalf("%q accepted as the server cursor %+v", s, sc)
			}
			again, err := decodeServerCursor(*encodeServerCursor(sc))
			if err != nil || *again != *sc {
				t.Fatalf("%q: %+v does not round-trip: %+v %v", s, sc, again, err)
			}
		}
		if eerr == nil {
			if seq <= 0 {
				t.Fatalf("%q accepted as the event cursor %d", s, seq)
			}
			again, err := decodeEventCursor(*encodeEventCursor(&seq))
			if err != nil || again != seq {
				t.Fatalf("%q: %d does not round-trip: %d %v", s, seq, again, err)
			}
		}
	})
}

// FuzzCursorRoundTrip: every position a listing can return encodes into a
// cursor within the length limit that decodes to that position, and only
// for its own listing.
func FuzzCursorRoundTrip(f *testing.F) {
	f.Add("calendar", []byte("0123456789abcdef"), int64(1))
	f.Add("a"+strings.Repeat("b", heartbeat.MaxModuleNameLen-1), make([]byte, 16), int64(1<<62))
	f.Add("x-1", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(-5))
	f.Fuzz(func(t *testing.T, module string, idBytes []byte, seq int64) {
		if id, err := uuid.FromBytes(idBytes); err == nil && heartbeat.ValidModuleName(module) {
			want := heartbeat.ServerCursor{ModuleName: module, ServerID: id}
			s := *encodeServerCursor(&want)
			if len(s) > maxCursorLen {
				t.Fatalf("server cursor of %+v is %d bytes, over the limit %d", want, len(s), maxCursorLen)
			}
			got, err := decodeServerCursor(s)
			if err != nil || *got != want {
				t.Fatalf("server cursor %+v came back %+v %v", want, got, err)
			}
			if _, err := decodeEventCursor(s); err == nil {
				t.Fatalf("the server cursor %q is taken by the audit listing", s)
			}
		}
		if seq > 0 {
			s := *encodeEventCursor(&seq)
			got, err := decodeEventCursor(s)
			if err != nil || got != seq {
				t.Fatalf("event cursor %d came back %d %v", seq, got, err)
			}
			if _, err := decodeServerCursor(s); err == nil {
				t.Fatalf("the event cursor %q is taken by the server listing", s)
			}
		}
	})
}
