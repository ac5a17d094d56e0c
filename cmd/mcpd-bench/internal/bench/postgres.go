package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// StartPostgres starts the harness's PostgreSQL cluster in a new directory
// under baseDir: pgtest's cluster (initdb, a random loopback port, trust
// authentication, a watchdog that removes it when the harness dies) with the
// server's default durability (fsync, synchronous_commit and
// full_page_writes on), since the tests' settings are wrong for figures;
// checkpoints, autovacuum runs, lock waits and statements of 20 ms or more
// are logged (the evidence of a tail). Destroy stops and removes it.
func StartPostgres(baseDir string) (*pgtest.Cluster, error) {
	return pgtest.StartCluster(pgtest.ClusterOptions{
		Durable: true,
		BaseDir: baseDir,
		Settings: map[string]string{"log_autovacuum_min_duration": "0", "log_checkpoints": "on",
			"log_lock_waits": "on", "log_min_duration_statement": "20ms"},
	})
}

// findPgbench finds pgbench: next to the server programs, else on PATH.
func findPgbench(pg *pgtest.Cluster) (string, error) {
	path := filepath.Join(pg.BinDir(), "pgbench")
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return path, nil
	}
	return exec.LookPath("pgbench")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) { return pgtest.FreePort() }

// cleanEnv is the harness's environment without PG* variables, which would
// point a client program elsewhere.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
