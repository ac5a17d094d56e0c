// Package store is the contract of mcpd's stores: every role a backend
// implements, in one place. The PostgreSQL store (pkg/pgstore) and the
// in-memory one (pkg/memstore) satisfy Backend, which is every role at
// once; pkg/testing/storetest is the conformance suite both run. Each
// consumer asks for the role it uses: the API for Store, the monitor for
// Monitor, the feed hub for FeedReader, the alert dispatcher for
// AlertOutbox and SkillAlerts. The types the roles carry that the API also
// carries (servers, events, positions, pages, filters) are in
// pkg/registry.
package store
