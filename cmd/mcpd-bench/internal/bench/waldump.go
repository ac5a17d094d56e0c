package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// WALRecordStat is what pg_waldump --stats=record counted of one record
// type (Heap/HOT_UPDATE, Btree/INSERT_LEAF, Transaction/COMMIT, ...)
// between two WAL positions: records, and bytes with full-page images.
type WALRecordStat struct {
	Type    string `json:"type"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
}

// lsnString is WAL position lsn (bytes) as PostgreSQL writes it: X/Y.
func lsnString(lsn int64) string {
	return fmt.Sprintf("%X/%X", uint64(lsn)>>32, uint64(lsn)&0xffffffff)
}

// WALRecordStats runs pg_waldump on pg's WAL from from to to and returns
// its per-record-type statistics, largest first.
func WALRecordStats(ctx context.Context, pg *pgtest.Cluster, from, to int64) ([]WALRecordStat, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	bin := filepath.Join(pg.BinDir(), "pg_waldump")
	cmd := exec.CommandContext(ctx, bin, "--stats=record", "-p", filepath.Join(pg.Dir(), "data", "pg_wal"),
		"-s", lsnString(from), "-e", lsnString(to))
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pg_waldump: %w: %s", err, firstLine(string(out)))
	}
	return parseWALStats(string(out)), nil
}

// parseWALStats reads pg_waldump --stats=record's table: each line
// "Type N (%) RecordSize (%) FPISize (%) Combined (%)", the total line
// left out.
func parseWALStats(out string) []WALRecordStat {
	var stats []WALRecordStat
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(line))
		if len(f) < 9 || !strings.Contains(f[0], "/") {
			continue
		}
		n, err1 := strconv.ParseInt(f[1], 10, 64)
		combined, err2 := strconv.ParseInt(f[7], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		stats = append(stats, WALRecordStat{Type: f[0], Records: n, Bytes: combined})
	}
	sort.SliceStable(stats, func(i, j int) bool { return stats[i].Bytes > stats[j].Bytes })
	return stats
}

// describeWALStats says the largest record types per call, of calls.
func describeWALStats(stats []WALRecordStat, calls int64, top int) string {
	if calls <= 0 || len(stats) == 0 {
		return ""
	}
	var parts []string
	for i, s := range stats {
		if i == top {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f records / %.0f B", s.Type, float64(s.Records)/float64(calls), float64(s.Bytes)/float64(calls)))
	}
	return "per heartbeat by pg_waldump: " + strings.Join(parts, ", ")
}
