// Package storetest is the conformance suite that every store.Store
// passes: the lifecycle thresholds, the skill cascade, the audit trail, the
// listings, tenant isolation and the concurrency guarantees, written once
// against the Store interface so that the PostgreSQL and the in-memory
// stores are held to the same spec.
//
// A store's own test calls Run with a function that returns a fresh,
// isolated Harness for every case:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness {
//			clock := clockwork.NewFakeClockAt(storetest.Start)
//			s := memstore.New(clock)
//			return storetest.Harness{Store: s, Clock: clock, DisableSkill: s.DisableSkill}
//		})
//	}
package storetest
