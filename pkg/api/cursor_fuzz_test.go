package api

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

var (
	fuzzTenant = uuid.MustParse("0b6e2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e")
	fuzzOther  = uuid.MustParse("1c7f3e4f-5a6b-4c7d-9e8f-0a1b2c3d4e5f")
)

func fuzzCodec(t testing.TB) *cursorCodec {
	c, err := newCursorCodec([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzDecodeCursor: no string makes cursor decoding panic; a string is
// accepted only when the codec sealed it, and then for one listing only and
// only for the tenant it was sealed for (a cursor cannot be forged).
func FuzzDecodeCursor(f *testing.F) {
	c := fuzzCodec(f)
	id := uuid.MustParse("6f1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e")
	b64 := base64.RawURLEncoding.EncodeToString
	for _, s := range []string{
		*c.encodeServerCursor(fuzzTenant, &registry.ServerCursor{ModuleName: "calendar", ServerID: id}),
		c.encodePosition(fuzzTenant, registry.Position{Epoch: 1, TxID: 42, Seq: 7}),
		*c.encodeSkillCursor(fuzzTenant, &registry.SkillCursor{Name: "search", ModuleName: "calendar"}),
		"", "e30", "%%", "====", "bm90LWpzb24", strings.Repeat("A", maxCursorLen+1),
		b64([]byte(`{"k":"e","q":42}`)), b64([]byte(`{"k":"s","m":"a","i":"` + id.String() + `"}`)),
		b64(make([]byte, 60)),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, serr := c.decodeServerCursor(fuzzTenant, s)
		pos, perr := c.decodePosition(fuzzTenant, s)
		kc, kerr := c.decodeSkillCursor(fuzzTenant, s)
		accepted := 0
		for _, err := range []error{serr, perr, kerr} {
			if err == nil {
				accepted++
			}
		}
		if accepted > 1 {
			t.Fatalf("%q is a cursor of %d listings", s, accepted)
		}
		if accepted == 1 {
			if _, err := c.decodeServerCursor(fuzzOther, s); err == nil {
				t.Fatalf("%q is taken for another tenant", s)
			}
			if _, err := c.decodePosition(fuzzOther, s); err == nil {
				t.Fatalf("%q is taken for another tenant", s)
			}
		}
		switch {
		case serr == nil && (sc == nil || !registry.ValidModuleName(sc.ModuleName)):
			t.Fatalf("%q accepted as the server cursor %+v", s, sc)
		case perr == nil && pos.Seq < 0:
			t.Fatalf("%q accepted as the position %+v", s, pos)
		case kerr == nil && (kc == nil || kc.Name == "" || !registry.ValidModuleName(kc.ModuleName)):
			t.Fatalf("%q accepted as the skills cursor %+v", s, kc)
		}
	})
}

// FuzzCursorRoundTrip: every position a listing can return encodes into a
// cursor within the length limit that decodes to that position, only for
// its own listing and its own tenant, and says nothing of the position in
// the clear.
func FuzzCursorRoundTrip(f *testing.F) {
	f.Add("calendar", []byte("0123456789abcdef"), uint64(1), uint64(7), int64(1), "search")
	f.Add("a"+strings.Repeat("b", registry.MaxModuleNameLen-1), make([]byte, 16), uint64(1<<40), uint64(1<<62), int64(0),
		strings.Repeat("ü", registry.MaxSkillNameLen))
	f.Fuzz(func(t *testing.T, module string, idBytes []byte, epoch, txid uint64, seq int64, skill string) {
		c := fuzzCodec(t)
		if id, err := uuid.FromBytes(idBytes); err == nil && registry.ValidModuleName(module) {
			want := registry.ServerCursor{ModuleName: module, ServerID: id}
			s := *c.encodeServerCursor(fuzzTenant, &want)
			if len(s) > maxCursorLen {
				t.Fatalf("server cursor of %+v is %d bytes, over the limit %d", want, len(s), maxCursorLen)
			}
			got, err := c.decodeServerCursor(fuzzTenant, s)
			if err != nil || *got != want {
				t.Fatalf("server cursor %+v came back %+v %v", want, got, err)
			}
			if _, err := c.decodePosition(fuzzTenant, s); err == nil {
				t.Fatalf("the server cursor %q is taken by the audit listing", s)
			}
			if _, err := c.decodeServerCursor(fuzzOther, s); err == nil {
				t.Fatalf("the server cursor %q is taken for another tenant", s)
			}
			if skill != "" && len([]rune(skill)) <= registry.MaxSkillNameLen {
				want := registry.SkillCursor{Name: skill, ModuleName: module}
				s := *c.encodeSkillCursor(fuzzTenant, &want)
				got, err := c.decodeSkillCursor(fuzzTenant, s)
				if err != nil || *got != want || len(s) > maxCursorLen {
					t.Fatalf("skills cursor %+v came back %+v %v (%d bytes)", want, got, err, len(s))
				}
			}
		}
		if seq >= 0 {
			want := registry.Position{Epoch: epoch, TxID: txid, Seq: seq}
			s := c.encodePosition(fuzzTenant, want)
			got, err := c.decodePosition(fuzzTenant, s)
			if err != nil || got != want {
				t.Fatalf("position %+v came back %+v %v", want, got, err)
			}
			if _, err := c.decodeServerCursor(fuzzTenant, s); err == nil {
				t.Fatalf("the position %q is taken by the server listing", s)
			}
			if _, err := c.decodePosition(fuzzOther, s); err == nil {
				t.Fatalf("the position %q is taken for another tenant", s)
			}
		}
	})
}
