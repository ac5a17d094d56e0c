package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestValidateMatchesPostgreSQL: the text rules of Validate are
// PostgreSQL's own. A capability advertisement passes Validate exactly when
// PostgreSQL takes it as jsonb, and a skill name exactly when PostgreSQL
// takes it as text (asked through mcpd's app role). A lone surrogate escape
// passed Validate and was a 500 from PostgreSQL (22P02).
func TestValidateMatchesPostgreSQL(t *testing.T) {
	t.Parallel()
	// Casts need no commit: one rolled-back transaction of the app role,
	// each cast in a savepoint so that a refused one does not end it.
	tx := pgtest.AppTx(t)
	ctx := context.Background()
	stored := func(sql, v string) (string, bool) {
		t.Helper()
		sp, err := tx.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		ok := sp.QueryRow(ctx, sql, v).Scan(&out) == nil
		if err := sp.Rollback(ctx); err != nil {
			t.Fatalf("roll back to the savepoint: %v", err)
		}
		return out, ok
	}
	stores := func(sql, v string) bool {
		t.Helper()
		_, ok := stored(sql, v)
		return ok
	}
	for _, caps := range []string{
		`{"a":"b"}`,
		`{"a":"\u0000"}`,
		`{"\u0000":1}`,
		`{"a":"\\u0000"}`,
		`{"a":"\\\u0000"}`,
		`{"a":"\ud800"}`,
		`{"a":"\uDBFF"}`,
		`{"a":"\udc00"}`,
		`{"\udfff":1}`,
		`{"a":"\ud800\u0041"}`,
		`{"a":"\ud800\ud800"}`,
		`{"a":"\udc00\ud800"}`,
		`{"a":"x\ud83d"}`,
		`{"a":"\ud83d\ude00"}`,
		`{"a":"\uD83D\uDE00"}`,
		`{"a":"\\ud800"}`,
		`{"a":"\\\ud800"}`,
		`{"a":"\\\\ud800"}`,
		`{"a":"\u00e9 é \u2028 \ufffd \uffff"}`,
		`{"a":["\u0001","\u001f"],"b":{"c":"\ud83d\ude00\ud800"}}`,
		"{\"a\":\"\xff\"}",
		"{\"a\":\"\xed\xa0\x80\"}",
		"{\"\xc0\xaf\":1}",
	} {
		info := validInfo()
		info.CapabilityAdvertisement = json.RawMessage(caps)
		valid := info.Validate() == nil
		if pg := stores(`SELECT $1::text::jsonb::text`, caps); valid != pg {
			t.Errorf("capabilities %q: Validate accepts %t, PostgreSQL stores %t", caps, valid, pg)
		}
	}
	// A number PostgreSQL stores is taken when it is stored within
	// MaxCapabilityBytes: 1e131071 is stored, as 131,072 digits.
	for _, num := range outOfRangeCandidates() {
		caps := `{"n":[` + num + `]}`
		info := validInfo()
		info.CapabilityAdvertisement = json.RawMessage(caps)
		valid := info.Validate() == nil
		text, pg := stored(`SELECT $1::text::jsonb::text`, caps)
		if pg = pg && len(text) <= registry.MaxCapabilityBytes; valid != pg {
			t.Errorf("capabilities with the number %.40q (%d bytes): Validate accepts %t, PostgreSQL stores %t (%d bytes)",
				num, len(num), valid, pg, len(text))
		}
	}
	for _, name := range []string{"a", "é😀", "a\x00b", "a\xff", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\uFFFD"} {
		info := validInfo()
		info.Skills = []registry.SkillInfo{{Name: name, Description: name}}
		valid := info.Validate() == nil
		if pg := stores(`SELECT $1::text`, name); valid != pg {
			t.Errorf("skill name %q: Validate accepts %t, PostgreSQL stores %t", name, valid, pg)
		}
	}
}

// outOfRangeCandidates are JSON numbers on both sides of what PostgreSQL's
// numeric holds: 131,072 digits before the point, 16,383 after it.
func outOfRangeCandidates() []string {
	return []string{
		"0", "-0", "1", "-1.5", "1e3", "1E+3", "1e-3", "0.0", "123.456e-2",
		"1e131071", "1e131072", "-1e131071", "-1e131072", "9.999e131071", "12345e131067", "12345e131068",
		"0.001e131074", "0.001e131075", "1e999999", "-1e999999", "1e131072000000000000",
		"1e-16383", "1e-16384", "1e-999999", "1.5e-16382", "1.5e-16383", "0e-16383", "0e-16384",
		"0e999999", "0e131072", "0e1073741822", "0e1073741823", "0e-1073741824", "1e-1073741824", "0e99999999999999999999", "0.0e-16383",
		"0." + strings.Repeat("1", 16383), "0." + strings.Repeat("1", 16384), "0." + strings.Repeat("0", 20000),
		"0." + strings.Repeat("9", 20000), "1" + strings.Repeat("0", 131071), "1" + strings.Repeat("0", 131072),
		strings.Repeat("0", 200000) + "1" + "e131071", "1" + strings.Repeat("0", 131071) + "e-1",
		"10e131070", "10e131071", "0.1e131072", "0.1e131073", "100000e-16383", "100000e-16384",
	}
}

// TestCapabilitySizeIsWhatPostgreSQLStores: CapabilitySize is the length of
// the advertisement as jsonb writes it back (numbers in full, spaces after
// ':' and ','), and Validate takes an advertisement exactly when that is at
// most MaxCapabilityBytes. A 9,112-byte registration of 1,000 numbers
// 1E131071 was stored as 131 MB, and every read of it answered as much.
func TestCapabilitySizeIsWhatPostgreSQLStores(t *testing.T) {
	t.Parallel()
	tx := pgtest.AppTx(t)
	ctx := context.Background()
	pgText := func(caps string) string {
		t.Helper()
		var out string
		if err := tx.QueryRow(ctx, `SELECT $1::text::jsonb::text`, caps).Scan(&out); err != nil {
			t.Fatalf("%.80s: %v", caps, err)
		}
		return out
	}
	// Exactly what PostgreSQL stores, when each number and string is sent
	// no longer than jsonb writes it.
	for _, caps := range []string{
		`{}`, `{"a":1}`, ` { "a" : [ 1 , 2 , {"b":null} ] , "c":true, "d":false } `,
		`{"n":[0,1,-1.5,1e3,1E+3,1e-3,0.0,1e2,0.0001,-0.5,12345678901234567890,1e-2]}`,
		`{"s":"\\ \" \t\n\r\u0001\u001f é 😀"}`,
		`{"a":{"b":{"c":[[[]]],"d":{}}}}`,
		`{"n":1E1000}`, `{"n":-1E-1000}`, `{"n":[1E131071]}`, `{"n":[1e-16383]}`,
	} {
		if got, text := registry.CapabilitySize([]byte(caps), -1), pgText(caps); got != len(text) {
			t.Errorf("%.60s: CapabilitySize %d, PostgreSQL stores %d bytes", caps, got, len(text))
		}
	}
	// At least what PostgreSQL stores, and what was sent, compacted.
	for _, caps := range []string{
		`{"n":[-0,100e-2,0.000e2,0e-5,1.0000e0,-0.0,123.456e-2,1.50e1,10e-1,0e5]}`,
		`{"s":"\u00e9\u0041\/\ud83d\ude00\u007f"}`,
		`{"dup":1,"dup":2}`,
	} {
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(caps)); err != nil {
			t.Fatal(err)
		}
		if got, text := registry.CapabilitySize([]byte(caps), -1), pgText(caps); got < len(text) || got < compact.Len() {
			t.Errorf("%.60s: CapabilitySize %d, PostgreSQL stores %d bytes, sent %d", caps, got, len(text), compact.Len())
		}
	}
	// On both sides of the bound, in each shape: a number's digits, a
	// string, many small numbers, many keys.
	shapes := map[string]func(k int) string{
		"exponent": func(k int) string { return `{"n":1E` + strconv.Itoa(k) + `}` },
		"fraction": func(k int) string { // 16,383 digits at most after the point: five numbers
			return `{"a":[` + strings.Repeat("1E-16000,", 4) + `1E-` + strconv.Itoa(max(1, k-60000)) + `]}`
		},
		"string": func(k int) string { return `{"s":"` + strings.Repeat("x", k) + `"}` },
		"array":  func(k int) string { return `{"a":[1` + strings.Repeat(",1", k) + `]}` },
		"keys": func(k int) string {
			var b strings.Builder
			b.WriteString(`{"k":"` + strings.Repeat("x", k%20) + `"`)
			for i := range k / 20 {
				fmt.Fprintf(&b, `,"%08d":"12345"`, i)
			}
			return b.String() + "}"
		},
	}
	for name, shape := range shapes {
		var took, refused bool
		for k := 16000; k < 70000 && (!took || !refused); k++ {
			caps := shape(k)
			n := len(pgText(caps))
			if n < registry.MaxCapabilityBytes-3 {
				k += max(0, (registry.MaxCapabilityBytes-3-n)/4) // approach the bound faster
				continue
			}
			info := validInfo()
			info.CapabilityAdvertisement = json.RawMessage(caps)
			err := info.Validate()
			if (err == nil) != (n <= registry.MaxCapabilityBytes) {
				t.Fatalf("%s k=%d: stored as %d bytes, Validate: %v", name, k, n, err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "capability_advertisement:") {
				t.Fatalf("%s k=%d: %v does not name capability_advertisement", name, k, err)
			}
			took, refused = took || err == nil, refused || err != nil
			if n > registry.MaxCapabilityBytes+3 {
				break
			}
		}
		if !took || !refused {
			t.Errorf("%s: never reached both sides of the bound (took %t, refused %t)", name, took, refused)
		}
	}
}
