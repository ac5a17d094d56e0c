// Package lifecycle drives the lifecycle of registered servers over a
// store.Store: the Registrar (register, heartbeat, deregister, as the
// servers' owners call them, each transition handed to the alert sink) and
// the Monitor, the one loop that sweeps silent servers to degraded and
// unhealthy, with the blind-window and mass-loss safeguards.
package lifecycle
