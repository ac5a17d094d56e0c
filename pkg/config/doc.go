// Package config is mcpd's typed configuration: the values every flag,
// MCPD_* environment variable and config file key sets, their defaults, and
// the checks a configuration must pass before the daemon starts. It knows
// nothing of flags or files; the command binds them.
package config
