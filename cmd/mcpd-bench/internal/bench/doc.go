// Package bench is mcpd's benchmark harness (make bench): it starts a
// PostgreSQL cluster of its own with the default durability settings (fsync
// and synchronous_commit on, the data directory on disk), migrates and seeds
// it, starts the real mcpd binary against it, and measures the heartbeat
// path end to end, the sweep, listing, memory, and the baselines the figures
// are judged by (pgbench's one-row update, etcd's lease keep-alive). Every
// load is closed or open loop on loopback, bounded in count and time.
//
// The driver program is cmd/mcpd-bench; docs/performance.md
// describes the method and the latest results.
package bench
