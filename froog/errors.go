package froog

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Error is an answer of 400 or more from the API: every call returns it as
// its error (errors.As(err, &fe) with fe *froog.Error).
type Error struct {
	// Status is the HTTP status, e.g. 404.
	Status int
	// Code is the API's error code, e.g. "not_found"; empty when the
	// answer was not the API's JSON error (a proxy's page, say).
	Code string
	// Message says what went wrong.
	Message string
	// RequestID is the answer's X-Request-Id, for a support request.
	RequestID string
	// RetryAfter is the answer's Retry-After, 0 when it had none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "froog: %d", e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// maxErrorBody bounds what is read of an error answer.
const maxErrorBody = 64 << 10

// readError reads res (status 400 or more) into an *Error and closes it.
func readError(res *http.Response) *Error {
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	e := &Error{Status: res.StatusCode, RequestID: res.Header.Get("X-Request-Id"), RetryAfter: retryAfter(res.Header.Get("Retry-After"))}
	var body ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		if e.RequestID == "" {
			e.RequestID = body.Error.RequestId
		}
		return e
	}
	e.Message = http.StatusText(res.StatusCode)
	if s := strings.TrimSpace(string(b)); s != "" && utf8.ValidString(s) && !strings.HasPrefix(s, "<") {
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		e.Message += ": " + s
	}
	return e
}

// retryAfter parses a Retry-After: seconds or an HTTP date; 0 if neither.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
