// Package memstore is an in-memory store.Store for mcpd --dev and for
// fast tests. It keeps everything behind one lock, passes the same
// conformance suite as the PostgreSQL store (pkg/testing/storetest), and
// forgets everything when the process ends.
package memstore
