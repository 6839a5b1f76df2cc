// Package api is froog's /v1 HTTP API (net/http): API-key auth with
// scopes, JSON errors {"error":{"code","message","request_id"}},
// X-Request-Id, per-IP rate limits, Idempotency-Key on creates, and the
// OpenAPI document that describes every route.
//
// It writes intent to the store and reads it back, and is HTTP only:
// what it does inside a sandbox (commands, jobs, SFTP sessions for the
// files routes and the calls on them: list, read, write, replace,
// delete, move, mkdir, chmod, walk, search, unpack) is package
// sandboxio's, behind the small interfaces Commands, Jobs and
// FileSessions (whose sessions are FileSession), and one function, fileError, maps sandboxio's file
// errors to answers in one place; starting a stopped sandbox and waiting
// for it or for a port (exec, jobs and files of a stopped auto-start
// sandbox, wait) is package wake's, behind Waker; a URL's recent
// traffic (its requests, followed live, and replay) is the edge's
// request rings', behind Traffic (whose comment says why not the
// store).
// It never dials a VM itself, and it must not import edge, hostctl or
// certs.
package api
