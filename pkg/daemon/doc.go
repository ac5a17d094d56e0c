// Package daemon is mcpd's lifecycle: it opens the store (PostgreSQL, or
// memory with --dev), builds the verifier, registrar, monitor and HTTP API
// from a config.Config, serves until stopped, drains on stop, and speaks
// systemd's notify protocol. It also holds the mcpd command line, which
// binds flags, MCPD_* variables and the config file into a config.Config.
package daemon
