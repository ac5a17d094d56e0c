package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	bin, err := findPGProgram(pg, "pg_waldump")
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "--stats=record", "-p", filepath.Join(pg.Dir(), "data", "pg_wal"),
		"-s", lsnString(from), "-e", lsnString(to))
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pg_waldump: %w: %s", err, firstLine(string(out)))
	}
	return parseWALStats(string(out)), nil
}

// findPGProgram finds one of PostgreSQL's programs for pg: next to its
// server programs, on PATH, else in /usr/lib/postgresql/<major>/bin of the
// server's major version (Debian keeps pg_waldump only there).
func findPGProgram(pg *pgtest.Cluster, name string) (string, error) {
	if path := filepath.Join(pg.BinDir(), name); isExecutableFile(path) {
		return path, nil
	}
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	if m := majorRe.FindStringSubmatch(pg.ServerVersion()); m != nil {
		if path := filepath.Join("/usr/lib/postgresql", m[1], "bin", name); isExecutableFile(path) {
			return path, nil
		}
	}
	// The newest, as pgtest chooses its server programs.
	paths, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql", "*", "bin", name))
	best, bestMajor := "", -1
	for _, p := range paths {
		n, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		if err == nil && n > bestMajor && isExecutableFile(p) {
			best, bestMajor = p, n
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s not found next to pg_ctl, on PATH or in /usr/lib/postgresql/*/bin", name)
	}
	return best, nil
}

var majorRe = regexp.MustCompile(`\b(\d+)\.\d+`)

func isExecutableFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
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
