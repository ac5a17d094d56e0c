// Package feed fans the audit trail out to watchers.
//
// A Hub reads every tenant's new events with one query per poll (or, for
// a store that says when an event commits, when it does), keeps the most
// recent ones in a bounded ring, and serves every watcher of every tenant
// from it: the cost in database reads does not grow with watchers. A
// watcher that starts, or falls, behind the ring catches up from the
// store's trail of its tenant, page by page, and then follows the ring; it
// never holds more than one page, so a slow reader costs no memory. The
// positions it hands out are the store's positions in commit order, so a
// watcher that resumes after the last one it received misses nothing and
// receives nothing twice.
package feed
