// Package froog is the Go SDK for froog's /v1 API.
//
// api.gen.go (the calls) and models.gen.go (their types) are generated
// from api/openapi.json by oapi-codegen, with overlay.yaml's changes (make
// generate; TestGeneratedUpToDate fails when either is stale): typed
// requests, responses and one method per operation. The hand-written files are a thin
// layer over those calls, in the docs' handle style:
//
//	c := froog.New("") // FROOG_API_KEY; NewWithOptions for the rest
//	res, err := c.Sandbox("my-box").Exec(ctx, "make test", nil)
//
// Errors are *Error (status, code, message, request id); creates and forks
// send an Idempotency-Key; 429 and 503 answers are retried after their
// Retry-After; exec streams NDJSON events. The hand-written files:
// client.go (New, Options, the retrying transport), errors.go (Error),
// sandbox.go (creating, listing and handling sandboxes), exec.go
// (commands, streamed or not), history.go (the command history, read
// while stopped too), files.go (reading and writing files),
// urls.go (a sandbox's public URLs), ports.go (the ports open on its IPv6
// address) and metrics.go (its metrics and
// processes, read now). This package holds no other HTTP calls than the
// generated ones, and imports nothing else of froog's.
package froog

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../api/openapi.json
//go:generate go tool oapi-codegen -config oapi-codegen-models.yaml ../api/openapi.json
