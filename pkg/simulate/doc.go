// Package simulate is the load engine of `mcpctl heartbeat-simulate`: it
// registers many servers, heartbeats each at the API's interval with jitter
// through a bounded worker pool, follows an optional scenario (stop, resume,
// deregister, flap), measures latency in bounded memory, and at the end can
// verify that every server has the status the scenario implies.
package simulate
