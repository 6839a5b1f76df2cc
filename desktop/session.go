package desktop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// CookieName is the session cookie on a view host. __Host- pins it to the
// exact host (no Domain), Path=/ and Secure; SameSite=None and
// Partitioned let a cross-site iframe keep it (in that site's partition).
const CookieName = "__Host-froog_desktop"

// Codes say why a link or session does not open a view. The page shows
// /error/CODE, a page a person understands; the JSON answers of /session
// carry the code too.
const (
	CodeLinkInvalid    = "link_invalid"    // no such link, or not a dt_ token
	CodeLinkExpired    = "link_expired"    // not opened within its time
	CodeWrongView      = "wrong_view"      // a link for another sandbox or kind
	CodeNoSession      = "no_session"      // no cookie, a forged or expired one
	CodeSandboxStopped = "sandbox_stopped" // not running, or restarted since the session began
	CodeDesktopFailed  = "desktop_failed"  // the desktop did not start, or its VNC port did not answer
	CodeRefused        = "refused"         // the viewer broke the RFB rules of its session
)

// Error is a refusal with its code; its message never holds a token or
// cookie.
type Error struct {
	Code string
	Err  error // the cause, for logs; may be nil
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "desktop: " + e.Code + ": " + e.Err.Error()
	}
	return "desktop: " + e.Code
}

func (e *Error) Unwrap() error { return e.Err }

func refuse(code string, err error) *Error { return &Error{Code: code, Err: err} }

// session is what the cookie carries, signed with Options.Key.
type session struct {
	SandboxID string `json:"s"`
	Kind      string `json:"k"`
	ViewOnly  bool   `json:"v,omitempty"`   // no input, for every connection of this session
	Locked    bool   `json:"l,omitempty"`   // the link itself is view-only: the page may not offer input
	Profile   string `json:"p,omitempty"`   // the browser view's profile folder, from the link ("" the default)
	Run       int64  `json:"r"`             // the sandbox's run (its start, Unix µs) the session belongs to
	Expires   int64  `json:"e"`             // Unix seconds after which no new connection is made with it: the link's expiry
	Key       string `json:"kid,omitempty"` // the API key that made the link
	Minted    int64  `json:"m,omitempty"`   // when it made the link, Unix µs
	// Input is, for a wall's session, the Unix second until which its
	// Use and Open mint links with input: the wall link's expiry.
	Input int64 `json:"i,omitempty"`
}

// cookieVersion prefixes a cookie's value so that the format can change.
const cookieVersion = "v1."

// seal encodes s as VERSION.PAYLOAD.MAC, both base64url: the MAC is
// HMAC-SHA256 over the version and payload.
func seal(key []byte, s session) string {
	payload, _ := json.Marshal(s) // a struct of strings, bools and ints
	p := cookieVersion + base64.RawURLEncoding.EncodeToString(payload)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(p))
	return p + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// maxCookie bounds a cookie's value: a session with the longest browser
// profile (guest.MaxProfile bytes, each escaped in JSON as up to six)
// fits, within the 4 KiB browsers keep of a cookie.
const maxCookie = 3072

// errCookie is every way a cookie can be bad; which one is not said.
var errCookie = errors.New("session cookie is malformed or not signed by this edge")

// open checks a cookie value's MAC and decodes it. It says nothing about
// expiry or the view: the caller checks those.
func open(key []byte, v string) (session, error) {
	var s session
	if len(v) > maxCookie {
		return s, errCookie
	}
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !strings.HasPrefix(v, cookieVersion) {
		return s, errCookie
	}
	mac, err := base64.RawURLEncoding.DecodeString(v[i+1:])
	if err != nil {
		return s, errCookie
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(v[:i]))
	if !hmac.Equal(mac, m.Sum(nil)) {
		return s, errCookie
	}
	payload, err := base64.RawURLEncoding.DecodeString(v[len(cookieVersion):i])
	if err != nil {
		return s, errCookie
	}
	if err := json.Unmarshal(payload, &s); err != nil {
		return s, errCookie
	}
	return s, nil
}

// HashToken is the form in which links are looked up: hex SHA-256 of the
// whole token, "dt_" included (store.HashSecret does the same).
func HashToken(token string) string { return store.HashSecret(token) }

// validToken reports whether t has a desktop token's form: "dt_" and up
// to 100 base64url or hex characters. Anything else is refused before a
// lookup.
func validToken(t string) bool {
	rest, ok := strings.CutPrefix(t, "dt_")
	if !ok || len(rest) < 16 || len(rest) > 100 {
		return false
	}
	for _, c := range []byte(rest) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// check decides whether a session opens view v at now for the sandbox's
// current run.
func (s session) check(v View, now time.Time, run time.Time, running bool) error {
	switch {
	case s.SandboxID != v.ID || s.Kind != v.Kind:
		return refuse(CodeNoSession, errors.New("session cookie for another view"))
	case now.Unix() >= s.Expires:
		return refuse(CodeNoSession, fmt.Errorf("session expired at %s", time.Unix(s.Expires, 0).UTC().Format(time.RFC3339)))
	case s.Kind == names.ViewWall:
		return nil // an account's wall: no sandbox run to end it
	case !running || run.UnixMicro() != s.Run:
		return refuse(CodeSandboxStopped, fmt.Errorf("sandbox %s stopped since the session began", s.SandboxID))
	}
	return nil
}

// KeyFrom derives the session key from the secret every API and edge
// process shares (the one that seals URL tokens): a key of its own, so
// that neither use can stand in for the other.
func KeyFrom(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("froog desktop sessions v1"))
	return m.Sum(nil)
}
