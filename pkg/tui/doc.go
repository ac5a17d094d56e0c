// Package tui is the live board of `mcpctl watch`: counts per status, a
// table of servers with their last heartbeat ageing by the second, and the
// latest transitions from the audit trail, refreshed from the API on a
// timer. The data comes through the small Source interface, so the board is
// tested as a function of messages, without a terminal or a network.
package tui
