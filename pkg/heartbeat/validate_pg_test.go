package heartbeat_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/cyberos/mcpd/pkg/heartbeat"
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
	db := pgtest.NewDB(t)
	ctx := context.Background()
	stores := func(sql, v string) bool {
		var out string
		return db.App.QueryRow(ctx, sql, v).Scan(&out) == nil
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
	for _, name := range []string{"a", "é😀", "a\x00b", "a\xff", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\uFFFD", "\u2028"} {
		info := validInfo()
		info.Skills = []heartbeat.SkillInfo{{Name: name, Description: name}}
		valid := info.Validate() == nil
		if pg := stores(`SELECT $1::text`, name); valid != pg {
			t.Errorf("skill name %q: Validate accepts %t, PostgreSQL stores %t", name, valid, pg)
		}
	}
}
