package desktop

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/desktop/rfb"
	"froog.tech/froog/guest"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/names"
)

var viewA = View{Kind: names.ViewDesktop, ID: sbxA}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Options{Key: []byte("short")})
	for _, want := range []string{"Links", "Starter", "Dialer", "Sandboxes", "Key", "Domain"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: got %v, want it to name %s", err, want)
		}
	}
}

func TestExchange(t *testing.T) {
	h := newHarness(t, viewA, 0)
	add := func(l Link) string {
		tok := "dt_" + strings.Repeat("k", 20) + l.SandboxID + l.Kind + time.Now().Format("150405.000000000")
		tok = strings.NewReplacer(":", "", ".", "").Replace(tok)
		l.Run = started
		h.links.add(tok, l)
		return tok
	}
	soon := h.clock().Add(10 * time.Minute)
	cases := []struct {
		name         string
		token        string
		pageViewOnly bool
		before       func()
		status       int
		code         string
		viewOnly     bool
		locked       bool
	}{
		{name: "ok", token: add(Link{SandboxID: sbxA, Kind: names.ViewDesktop, ExpiresAt: soon}), status: 200},
		// The first exchange decides: a link exchanged view-only is view-only for good.
		{name: "page asks view-only", token: add(Link{SandboxID: sbxA, Kind: names.ViewDesktop, ExpiresAt: soon}), pageViewOnly: true, status: 200, viewOnly: true, locked: true},
		{name: "view-only link and viewonly=0 stays view-only", token: add(Link{SandboxID: sbxA, Kind: names.ViewDesktop, ViewOnly: true, ExpiresAt: soon}), status: 200, viewOnly: true, locked: true},
		{name: "expired", token: add(Link{SandboxID: sbxA, Kind: names.ViewDesktop, ExpiresAt: h.clock()}), status: 410, code: CodeLinkExpired},
		{name: "browser link on the desktop host", token: add(Link{SandboxID: sbxA, Kind: names.ViewBrowser, ExpiresAt: soon}), status: 403, code: CodeWrongView},
		{name: "another sandbox's link", token: add(Link{SandboxID: sbxB, Kind: names.ViewDesktop, ExpiresAt: soon}), status: 403, code: CodeWrongView},
		{name: "unknown token", token: "dt_" + strings.Repeat("z", 30), status: 403, code: CodeLinkInvalid},
		{name: "not a token", token: "ut_" + strings.Repeat("z", 30), status: 403, code: CodeLinkInvalid},
		{name: "sandbox stopped", token: add(Link{SandboxID: sbxA, Kind: names.ViewDesktop, ExpiresAt: soon}),
			before: func() { h.sandboxes.set(sbxA, time.Time{}, false) }, status: 503, code: CodeSandboxStopped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.sandboxes.set(sbxA, started, true)
			if c.before != nil {
				c.before()
			}
			res, cookie := h.exchange(c.token, c.pageViewOnly)
			if res.StatusCode != c.status {
				t.Fatalf("got status %d, want %d", res.StatusCode, c.status)
			}
			if c.code != "" {
				if cookie != nil {
					t.Errorf("a refused exchange set a cookie")
				}
				if !strings.Contains(h.logs.String(), `"code":"`+c.code+`"`) {
					t.Errorf("log has no line with code %s", c.code)
				}
				return
			}
			if cookie == nil {
				t.Fatal("no session cookie")
			}
			if !cookie.Secure || !cookie.HttpOnly || cookie.SameSite != http.SameSiteNoneMode || !cookie.Partitioned || cookie.Path != "/" || cookie.Domain != "" {
				t.Errorf("cookie attributes %+v", cookie)
			}
			st := h.state(cookie)
			if st.ViewOnly != c.viewOnly || st.Locked != c.locked {
				t.Errorf("got view_only %v locked %v, want %v %v", st.ViewOnly, st.Locked, c.viewOnly, c.locked)
			}
		})
	}
	// Nothing secret in the logs.
	for _, c := range cases {
		if strings.Contains(h.logs.String(), c.token) || strings.Contains(h.logs.String(), strings.TrimPrefix(c.token, "dt_")) {
			t.Errorf("the log holds the token of %q", c.name)
		}
	}
}

// state GETs /session with a cookie.
func (h *harness) state(c *http.Cookie) sessionState {
	h.t.Helper()
	res, body := h.get(PathSession, c)
	if res.StatusCode != 200 {
		h.t.Fatalf("GET /session: status %d: %s", res.StatusCode, body)
	}
	var st sessionState
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) get(path string, c *http.Cookie) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.ts.URL+path, nil)
	if c != nil {
		req.AddCookie(c)
	}
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestExchangeFromAnotherOrigin(t *testing.T) {
	h := newHarness(t, viewA, 0)
	req, _ := http.NewRequest("POST", h.ts.URL+PathSession, strings.NewReader(`{"token":"`+h.link(false)+`"}`))
	req.Header.Set("Origin", "https://evil.example")
	res, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 || len(res.Cookies()) != 0 {
		t.Fatalf("got %d with %d cookies, want 403 and none", res.StatusCode, len(res.Cookies()))
	}
}

func TestSessionCookie(t *testing.T) {
	h := newHarness(t, viewA, 0)
	_, good := h.exchange(h.link(false), false)
	if good == nil {
		t.Fatal("no cookie")
	}
	tamper := func(v string) string { // flip a payload bit, keep the MAC
		b := []byte(v)
		b[5] ^= 1
		return string(b)
	}
	forged := seal([]byte(strings.Repeat("x", 32)), session{SandboxID: sbxA, Kind: names.ViewDesktop, Run: started.UnixMicro(), Expires: h.clock().Add(time.Hour).Unix()})
	otherView := seal(testKey, session{SandboxID: sbxB, Kind: names.ViewDesktop, Run: started.UnixMicro(), Expires: h.clock().Add(time.Hour).Unix()})
	browser := seal(testKey, session{SandboxID: sbxA, Kind: names.ViewBrowser, Run: started.UnixMicro(), Expires: h.clock().Add(time.Hour).Unix()})
	cases := []struct {
		name   string
		value  string
		before func()
		code   string
	}{
		{name: "good", value: good.Value},
		{name: "good within the link's 10 minutes", value: good.Value, before: func() { h.advance(9 * time.Minute) }},
		{name: "forged with another key", value: forged, code: CodeNoSession},
		{name: "tampered payload", value: tamper(good.Value), code: CodeNoSession},
		{name: "MAC cut", value: good.Value[:len(good.Value)-3], code: CodeNoSession},
		{name: "garbage", value: "v1.%%%.###", code: CodeNoSession},
		{name: "another sandbox's session", value: otherView, code: CodeNoSession},
		{name: "the browser view's session", value: browser, code: CodeNoSession},
		{name: "after a restart of the sandbox", value: good.Value, before: func() { h.sandboxes.set(sbxA, started.Add(time.Hour), true) }, code: CodeSandboxStopped},
		{name: "sandbox stopped", value: good.Value, before: func() { h.sandboxes.set(sbxA, time.Time{}, false) }, code: CodeSandboxStopped},
		{name: "past the link's 10 minutes", value: good.Value, before: func() { h.advance(time.Minute) }, code: CodeNoSession},
		{name: "expired after 24 h", value: good.Value, before: func() { h.advance(24 * time.Hour) }, code: CodeNoSession},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.sandboxes.set(sbxA, started, true)
			if c.before != nil {
				c.before()
			}
			res, body := h.get(PathSession, &http.Cookie{Name: CookieName, Value: c.value})
			if c.code == "" {
				if res.StatusCode != 200 {
					t.Fatalf("got %d %s, want 200", res.StatusCode, body)
				}
				return
			}
			if res.StatusCode == 200 || !strings.Contains(body, `"code":"`+c.code+`"`) {
				t.Fatalf("got %d %s, want code %s", res.StatusCode, body, c.code)
			}
			// The websocket refuses it too, before upgrading.
			_, wres, err := h.dialWS(&http.Cookie{Name: CookieName, Value: c.value}, "")
			if err == nil || wres == nil || wres.StatusCode == http.StatusSwitchingProtocols {
				t.Fatalf("websocket with a bad session: err %v", err)
			}
		})
	}
	if strings.Contains(h.logs.String(), good.Value) || strings.Contains(h.logs.String(), forged) {
		t.Error("the log holds a cookie")
	}
}

func FuzzSessionCookie(f *testing.F) {
	f.Add(seal(testKey, session{SandboxID: sbxA, Kind: names.ViewDesktop, Run: 1, Expires: 2}))
	f.Add("v1.e30.AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		s, err := open(testKey, v)
		if err != nil {
			return
		}
		// Whatever opens must be what this key sealed.
		if got := seal(testKey, s); got != v {
			m, _ := open(testKey, got)
			if m != s {
				t.Fatalf("opened %q as %+v, which seals to %+v", v, s, m)
			}
		}
	})
}

// The bridge end to end against fakeRFB: a frame arrives, the shared
// flag is forced, and in view-only a KeyEvent never reaches the server
// while the requests around it do.
func TestBridgeFakeRFB(t *testing.T) {
	for _, c := range []struct {
		name                          string
		linkViewOnly, pageViewOnly    bool
		query                         string
		wantKeys, wantPointer, wantCT int
	}{
		{name: "input", wantKeys: 2, wantPointer: 1, wantCT: 1},
		{name: "view-only page", pageViewOnly: true},
		{name: "view-only link", linkViewOnly: true},
		{name: "viewonly=1 on the websocket", query: "?viewonly=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			magenta := [3]byte{255, 0, 255}
			fake := newFakeRFB(t, magenta)
			h := newHarness(t, viewA, fake.port())
			_, cookie := h.exchange(h.link(c.linkViewOnly), c.pageViewOnly)
			ws, _, err := h.dialWS(cookie, c.query)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			// Shared 0 on purpose: the bridge must make it 1.
			rc, err := testkit.NewRFB(testkit.NewWSStream(ws), false)
			if err != nil {
				t.Fatalf("RFB through the bridge: %v", err)
			}
			if got, err := rc.Pixel(0, 0); err != nil || got != magenta {
				t.Fatalf("got colour %v (%v), want %v", got, err, magenta)
			}
			// A key down, a click, the key up, a cut text of "hello".
			if err := rc.Send([]byte{rfb.MsgKeyEvent, 1, 0, 0, 0, 0, 0, 'a'}, []byte{rfb.MsgPointerEvent, 1, 0, 10, 0, 20},
				[]byte{rfb.MsgKeyEvent, 0, 0, 0, 0, 0, 0, 'a'}, []byte{rfb.MsgClientCutText, 0, 0, 0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'}); err != nil {
				t.Fatal(err)
			}
			if got, err := rc.Pixel(0, 0); err != nil || got != magenta {
				t.Fatalf("after input: got colour %v (%v), want %v", got, err, magenta)
			}
			// The second frame request came after the input on the same
			// stream, so the input (if let through) reached the fake first.
			if got := fake.count(rfb.MsgFramebufferUpdateRequest); got != 2 {
				t.Errorf("got %d update requests at the server, want 2", got)
			}
			if k, p, ct := fake.count(rfb.MsgKeyEvent), fake.count(rfb.MsgPointerEvent), fake.count(rfb.MsgClientCutText); k != c.wantKeys || p != c.wantPointer || ct != c.wantCT {
				t.Errorf("at the server: %d key, %d pointer, %d cut text events; want %d, %d, %d", k, p, ct, c.wantKeys, c.wantPointer, c.wantCT)
			}
			fake.mu.Lock()
			shared := fake.shared
			fake.mu.Unlock()
			if len(shared) != 1 || shared[0] != 1 {
				t.Errorf("ClientInit shared flags at the server %v, want [1]", shared)
			}
		})
	}
}

// A browser link's profile travels in its session to the Starter, which
// starts the browser view with it; a link without one asks the default.
func TestBridgeBrowserProfile(t *testing.T) {
	fake := newFakeRFB(t, [3]byte{1, 2, 3})
	h := newHarness(t, View{Kind: names.ViewBrowser, ID: sbxA}, fake.port())
	for i, profile := range []string{"/home/u/work", ""} {
		tok := "dt_" + strings.Repeat("p", 20) + fmt.Sprint(i)
		h.links.add(tok, Link{SandboxID: sbxA, Kind: names.ViewBrowser, Profile: profile, Run: started, ExpiresAt: h.clock().Add(time.Minute)})
		_, cookie := h.exchange(tok, false)
		ws, _, err := h.dialWS(cookie, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := testkit.NewRFB(testkit.NewWSStream(ws), false); err != nil {
			t.Fatalf("RFB through the bridge: %v", err)
		}
		ws.Close()
	}
	// The longest profile, of characters JSON escapes, still fits the
	// cookie.
	long := "/home/" + strings.Repeat("<", guest.MaxProfile-6)
	h.links.add("dt_"+strings.Repeat("q", 20), Link{SandboxID: sbxA, Kind: names.ViewBrowser, Profile: long, Run: started, ExpiresAt: h.clock().Add(time.Minute)})
	_, cookie := h.exchange("dt_"+strings.Repeat("q", 20), false)
	if cookie == nil || len(cookie.Value) > 4000 {
		t.Fatalf("the longest profile's session cookie: %v", cookie)
	}
	ws, _, err := h.dialWS(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.NewRFB(testkit.NewWSStream(ws), false); err != nil {
		t.Fatalf("RFB through the bridge: %v", err)
	}
	ws.Close()
	h.starter.mu.Lock()
	defer h.starter.mu.Unlock()
	if got := fmt.Sprintf("%q", h.starter.profiles); got != `["/home/u/work" "" "`+long+`"]` {
		t.Errorf("the starter was asked for profiles %s, want the links'", got)
	}
}

// A stop of the sandbox closes an open bridge with the code the page
// turns into its error page; a refused client message closes it too.
func TestBridgeCloses(t *testing.T) {
	fake := newFakeRFB(t, [3]byte{1, 2, 3})
	h := newHarness(t, viewA, fake.port())
	_, cookie := h.exchange(h.link(true), false)

	ws, _, err := h.dialWS(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := testkit.NewRFB(testkit.NewWSStream(ws), false)
	if err == nil {
		_, err = rc.Pixel(0, 0)
	}
	if err != nil {
		t.Fatalf("RFB through the bridge: %v", err)
	}
	h.sandboxes.set(sbxA, time.Time{}, false)
	if code, reason := closeOf(t, ws); code != closeSandboxStopped || reason != CodeSandboxStopped {
		t.Errorf("after a stop: close %d %q, want %d %q", code, reason, closeSandboxStopped, CodeSandboxStopped)
	}
	wait.For(t, 5*time.Second, "the bridge to close", func() bool { return h.srv.Conns() == 0 })

	h.sandboxes.set(sbxA, started, true)
	ws, _, err = h.dialWS(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err = testkit.NewRFB(testkit.NewWSStream(ws), false); err != nil {
		t.Fatalf("RFB through the bridge: %v", err)
	}
	if err := rc.Send([]byte{253, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if code, reason := closeOf(t, ws); code != closeRefused || reason != CodeRefused {
		t.Errorf("after an unknown message: close %d %q, want %d %q", code, reason, closeRefused, CodeRefused)
	}

	h.starter.mu.Lock()
	h.starter.port = 1 // nothing listens there
	h.starter.mu.Unlock()
	ws, _, err = h.dialWS(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	if code, reason := closeOf(t, ws); code != closeDesktopFailed || reason != CodeDesktopFailed {
		t.Errorf("without a VNC server: close %d %q, want %d %q", code, reason, closeDesktopFailed, CodeDesktopFailed)
	}
	if strings.Contains(h.logs.String(), cookie.Value) {
		t.Error("the log holds the cookie")
	}
}

// A websocket from another site's page is refused even with the cookie
// (SameSite=None sends it along).
func TestBridgeOtherOrigin(t *testing.T) {
	h := newHarness(t, viewA, 1)
	_, cookie := h.exchange(h.link(false), false)
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	_, res, err := d.Dial("wss://"+h.host()+PathWebsocket, http.Header{"Origin": {"https://evil.example"}, "Cookie": {cookie.Name + "=" + cookie.Value}})
	if err == nil || res == nil || res.StatusCode != 403 {
		t.Fatalf("got %v, want 403", err)
	}
}

func closeOf(t *testing.T, ws *websocket.Conn) (int, string) {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("read: %v, want a close frame", err)
		}
		return ce.Code, ce.Text
	}
}

func TestPages(t *testing.T) {
	h := newHarness(t, viewA, 0)
	res, body := h.get("/?theme=light&overlay=0", nil)
	if res.StatusCode != 200 || !strings.Contains(body, `class="theme-light no-overlay"`) {
		t.Errorf("page: %d %s", res.StatusCode, body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "frame-ancestors *", "default-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if res.Header.Get("X-Frame-Options") != "" {
		t.Error("X-Frame-Options would stop embeds")
	}
	for code, e := range errorTexts {
		res, body := h.get(PathError+code, nil)
		if res.StatusCode != e.status || !strings.Contains(body, e.title[:10]) {
			t.Errorf("error page %s: %d %s", code, res.StatusCode, body)
		}
	}
	for path, ct := range map[string]string{"/assets/viewer.js": "javascript", "/assets/novnc/core/rfb.js": "javascript", "/assets/viewer.css": "text/css"} {
		res, _ := h.get(path, nil)
		if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), ct) {
			t.Errorf("%s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/assets/viewer.html", "/assets/../desktop.go", "/assets/novnc/", "/nothing"} {
		if res, _ := h.get(path, nil); res.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, res.StatusCode)
		}
	}
}
