package registry_test

import (
	"context"
	"encoding/json"
	"os"
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
	stores := func(sql, v string) bool {
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
	for _, num := range outOfRangeCandidates() {
		caps := `{"n":[` + num + `]}`
		info := validInfo()
		info.CapabilityAdvertisement = json.RawMessage(caps)
		valid := info.Validate() == nil
		if pg := stores(`SELECT $1::text::jsonb::text`, caps); valid != pg {
			t.Errorf("capabilities with the number %.40q (%d bytes): Validate accepts %t, PostgreSQL stores %t", num, len(num), valid, pg)
		}
	}
	for _, name := range []string{"a", "é😀", "a\x00b", "a\xff", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\uFFFD", "\u2028"} {
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
