package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"froog.tech/froog/store"
)

// Error is an API error: an HTTP status, a stable code and a message that
// never holds a secret.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, in seconds, is sent as Retry-After when positive.
	RetryAfter int
	// RateLimit, when set, is sent as the RateLimit-* headers in place of
	// the per-IP limit's: those of the limit that refused.
	RateLimit *rateLimit
	// cause is what went wrong inside (a dial's address, an SSH error):
	// never sent to the client, it is in Error() and so in the server's
	// log line of the request, with its request id.
	cause error
}

// rateLimit is what the RateLimit-* headers say of one limit.
type rateLimit struct {
	Limit, Remaining int
	Reset            int    // seconds until the window frees
	Policy           string // "20;w=60"; empty for a limit that is no window
}

func (l rateLimit) set(h http.Header) {
	h.Set("RateLimit-Limit", fmt.Sprint(l.Limit))
	h.Set("RateLimit-Remaining", fmt.Sprint(l.Remaining))
	h.Set("RateLimit-Reset", fmt.Sprint(l.Reset))
	if l.Policy != "" {
		h.Set("RateLimit-Policy", l.Policy)
	} else {
		h.Del("RateLimit-Policy")
	}
}

// nominalRetry is the Retry-After of a limit that frees when something
// else happens (a sandbox stops, a command ends), not at a known time: a
// client that honours it tries again then, as the docs' clients do.
const nominalRetry = 30

// ceilSecs is d in whole seconds, rounded up, at least 1.
func ceilSecs(d time.Duration) int { return max(int((d+time.Second-1)/time.Second), 1) }

// limitError is the 429 limit_reached answer to a store limit at now. Its
// message names the limit; Retry-After is when a rate limit allows the
// request again (the store knows: RetryAt), or nominalRetry.
func limitError(le *store.LimitError, now time.Time) *Error {
	e := errorf(http.StatusTooManyRequests, "limit_reached", "limit reached: %s (%d)", le.Limit, le.Max)
	e.RetryAfter = nominalRetry
	if !le.RetryAt.IsZero() {
		e.RetryAfter = ceilSecs(le.RetryAt.Sub(now))
	}
	rl := &rateLimit{Limit: le.Max, Reset: e.RetryAfter}
	if le.Window > 0 {
		rl.Policy = fmt.Sprintf("%d;w=%d", le.Max, int(le.Window/time.Second))
	}
	switch le.Limit {
	case "sandboxes_at_once":
		e.Message = fmt.Sprintf("limit reached: sandboxes at once (%d): stop one, or ask for more", le.Max)
	case "starts_per_minute", "starts_per_hour", "starts_per_day":
		e.Message = fmt.Sprintf("limit reached: %d starts per %s; a start is allowed again in %d s", le.Max, windowName(le.Window), e.RetryAfter)
	}
	e.RateLimit = rl
	return e
}

func windowName(d time.Duration) string {
	switch d {
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Code + ": " + e.Message + " (cause: " + e.cause.Error() + ")"
	}
	return e.Code + ": " + e.Message
}

// withCause is e with its inner cause, for the log alone.
func withCause(e *Error, cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(code, format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, code, format, args...)
}

func invalid(format string, args ...any) *Error {
	return badRequest("invalid_value", format, args...)
}

// toError maps an error from a handler to the API error it answers with,
// at now. It is the one place where store errors become statuses.
func toError(err error, now time.Time) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var le *store.LimitError
	switch {
	case errors.As(err, &le) && le.Limit == "ports_per_sandbox":
		return errorf(http.StatusConflict, "too_many_ports", "at most %d ports per sandbox, its public URLs' included: close one first", le.Max)
	case errors.As(err, &le):
		return limitError(le, now)
	case errors.Is(err, store.ErrBadPort):
		return badRequest("invalid_port", "%s", err.Error())
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "not_found", "not found")
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, "conflict", "conflict")
	case errors.Is(err, store.ErrURLPublic):
		return errorf(http.StatusConflict, "url_public", "a public URL has no viewer tokens")
	case errors.Is(err, store.ErrIdempotencyInUse):
		return errorf(http.StatusConflict, "idempotency_key_in_use", "a request with this Idempotency-Key is still running")
	case errors.Is(err, store.ErrIdempotencyReused):
		return errorf(http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used with a different request")
	}
	return errorf(http.StatusInternalServerError, "internal", "internal error")
}

type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, r *http.Request, e *Error) {
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.RequestID = e.Code, e.Message, requestID(r)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	if e.RateLimit != nil {
		e.RateLimit.set(w.Header())
	}
	writeJSON(w, e.Status, b)
}
