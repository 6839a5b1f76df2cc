package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

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
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(code, format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, code, format, args...)
}

func invalid(format string, args ...any) *Error {
	return badRequest("invalid_value", format, args...)
}

// toError maps an error from a handler to the API error it answers with.
// It is the one place where store errors become statuses.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var le *store.LimitError
	switch {
	case errors.As(err, &le):
		return errorf(http.StatusTooManyRequests, "limit_reached", "limit reached: %s (%d)", le.Limit, le.Max)
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
	writeJSON(w, e.Status, b)
}
