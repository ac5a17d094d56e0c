// Package limit keeps the per-tenant limits of one mcpd process: a token
// bucket of API requests per tenant and a count of each tenant's concurrent
// watch streams. Limits are per process: behind a load balancer over n
// replicas a tenant may get up to n times them.
package limit
