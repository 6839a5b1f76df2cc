// Package api is froog's /v1 HTTP API (net/http): API-key auth with
// scopes, JSON errors {"error":{"code","message","request_id"}},
// X-Request-Id, per-IP rate limits, Idempotency-Key on creates, and the
// OpenAPI document that describes every route.
//
// It writes intent to the store and reads it back; it never dials a VM
// itself (commands, waits and files go through package tunnel: files over
// an sftp subsystem session on the sandbox's connection), and
// it must not import edge, hostctl or certs.
package api
