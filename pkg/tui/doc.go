// Package tui is the live board of `mcpctl watch`: counts per status, a
// table of servers with the ages of their last heartbeat and last
// transition, and the latest transitions. It lists the servers once, then
// follows the change feed from the list's watch cursor, applying each
// event to its server's row; a cursor the API can no longer resume from
// makes it list again. The data comes through the small Source interface,
// so the board is tested as a function of messages, without a terminal or
// a network.
package tui
