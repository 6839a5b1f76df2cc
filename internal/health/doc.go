// Package health serves a process's operational endpoints on its admin
// listener (--metrics-addr): /healthz (the process is alive: it answers),
// /readyz (every readiness check of its role passes; 503 naming the ones
// that fail otherwise) and /metrics (Prometheus). They have a listener of
// their own because every path on the edge's public listener belongs to a
// sandbox's host. It imports none of froog's packages: the roles
// (cmd/froogd) declare their checks.
package health
