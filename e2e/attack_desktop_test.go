package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// Desktop links and sessions as capabilities, through the real binary
// (issue #24, items 2-5): a link belongs to one run of one sandbox, a
// view-only choice sticks, a session makes new connections only within
// its link's 10 minutes, and a view-only viewer gets no clipboard. The
// desktop, the browser view and the wall's Use are each tried.
func TestAttackDesktopCapabilities(t *testing.T) {
	t.Parallel()
	e := devDesktop(t)
	e.sandbox(t, "atk")
	var sb struct{ ID string }
	e.c.call("GET", "/v1/sandboxes/atk", "", 200, &sb)
	wall := e.wallSession(t)

	t.Run("a link opens only the run it was made in", func(t *testing.T) {
		desk, browser := e.link(t, "atk", "desktop", ""), e.link(t, "atk", "browser", "{}")
		use := wall.live(t, sb.ID, "use")
		e.c.call("POST", "/v1/sandboxes/atk/stop", "", 202, nil)
		wait.For(t, time.Minute, "atk to stop", func() bool {
			var st struct{ State string }
			e.c.call("GET", "/v1/sandboxes/atk", "", 200, &st)
			return st.State == "stopped"
		})
		// A stopped sandbox has no desktop: no link for it.
		for _, p := range []string{"desktop", "desktop?viewonly=1", "browser"} {
			var res struct{ Error struct{ Code string } }
			e.c.call("POST", "/v1/sandboxes/atk/"+p, "{}", 409, &res)
			if res.Error.Code != "conflict" {
				t.Errorf("POST %s on a stopped sandbox: code %q, want conflict", p, res.Error.Code)
			}
		}
		e.c.call("POST", "/v1/sandboxes/atk/start", "", 202, nil)
		runs(t, e.c, "atk")
		wait.For(t, 30*time.Second, "the edge to see atk's new run", func() bool {
			link := e.link(t, "atk", "desktop", "")
			st, _ := e.session(t, hostOf(t, link), tokenOf(t, link))
			return st == 200
		})
		for name, link := range map[string]string{"desktop": desk, "browser": browser, "the wall's Use": use} {
			if st, cookie := e.session(t, hostOf(t, link), tokenOf(t, link)); st == 200 || cookie != "" {
				t.Errorf("%s link made before the stop opened the next run: %d", name, st)
			}
		}
	})

	t.Run("a link exchanged view-only stays view-only", func(t *testing.T) {
		for name, link := range map[string]string{
			"desktop":        e.link(t, "atk", "desktop", ""),
			"browser":        e.link(t, "atk", "browser", "{}"),
			"the wall's Use": wall.live(t, sb.ID, "use"),
		} {
			host, token := hostOf(t, link), tokenOf(t, link)
			first := e.exchange(t, host, token, true) // the documented embed: viewonly=1 in the link's query
			if st := e.state(t, host, first); !st.ViewOnly {
				t.Errorf("%s: the view-only exchange has input: %+v", name, st)
			}
			again := e.exchange(t, host, token, false) // whoever reads the iframe's src
			if st := e.state(t, host, again); !st.ViewOnly || !st.Locked {
				t.Errorf("%s: the same token exchanged again without view-only: %+v, want view-only and locked", name, st)
			}
		}
	})

	t.Run("a session connects only within its link's 10 minutes", func(t *testing.T) {
		for name, link := range map[string]string{
			"desktop":        e.link(t, "atk", "desktop", ""),
			"browser":        e.link(t, "atk", "browser", "{}"),
			"the wall's Use": wall.live(t, sb.ID, "use"),
		} {
			host := hostOf(t, link)
			res := e.exchangeRes(t, host, tokenOf(t, link), false)
			var ck *http.Cookie
			for _, c := range res.Cookies() {
				if c.Name == "__Host-froog_desktop" {
					ck = c
				}
			}
			if ck == nil {
				t.Fatalf("%s: no session", name)
			}
			if ck.MaxAge <= 0 || ck.MaxAge > 600 {
				t.Errorf("%s: the session cookie lives %d s, want at most the link's 600", name, ck.MaxAge)
			}
			if st := e.state(t, host, ck.Name+"="+ck.Value); time.Until(st.ExpiresAt) > 10*time.Minute {
				t.Errorf("%s: the session makes connections until %v, past the link's 10 minutes", name, st.ExpiresAt)
			}
		}
	})

	t.Run("a view-only viewer gets no clipboard", func(t *testing.T) {
		display := e.display(t, "atk", "desktop")
		conn := func(viewOnly bool, ext bool) *testkit.RFB {
			path := "desktop"
			if viewOnly {
				path = "desktop?viewonly=1"
			}
			link := e.link(t, "atk", path, "")
			st, cookie := e.session(t, hostOf(t, link), tokenOf(t, link))
			if st != 200 {
				t.Fatalf("session: %d", st)
			}
			c := e.rfb(t, hostOf(t, link), cookie)
			if ext { // Raw and the Extended Clipboard pseudo-encoding
				if err := c.SetEncodings(0, -1063131698); err != nil {
					t.Fatal(err)
				}
			}
			return c
		}
		fullExt, fullPlain := conn(false, true), conn(false, false)
		viewExt, viewPlain := conn(true, true), conn(true, false)
		// The Extended Clipboard's caps come at once to a client that asks.
		if cuts := cutTexts(t, fullExt, 20, true); len(cuts) == 0 {
			t.Fatal("the control: a session with input got no Extended Clipboard message")
		}
		if _, err := exec.LookPath("wish"); err != nil {
			testdep.Missing(t, "wish is not installed (tk)")
		}
		e.sh(t, "atk", `printf 'wm withdraw .\nclipboard clear\nclipboard append froog-secret-clip\nafter 120000 exit\n' > clip.tcl`)
		body, _ := json.Marshal(map[string]string{"command": "DISPLAY=" + display + " exec wish clip.tcl"})
		e.c.call("POST", "/v1/sandboxes/atk/jobs", string(body), 201, nil)
		var got []byte
		wait.For(t, 30*time.Second, "the sandbox's clipboard at a session with input", func() bool {
			for _, c := range cutTexts(t, fullPlain, 3, false) {
				got = append(got, c...)
			}
			return bytes.Contains(got, []byte("froog-secret-clip"))
		})
		for name, c := range map[string]*testkit.RFB{"extended": viewExt, "plain": viewPlain} {
			if cuts := cutTexts(t, c, 10, false); len(cuts) > 0 {
				t.Errorf("a view-only viewer (%s) got the clipboard: %q", name, cuts)
			}
		}
	})
}

// cutTexts asks for a pixel n times and returns every ServerCutText's
// data that came with the answers (an Extended Clipboard one's too);
// untilOne stops at the first.
func cutTexts(t *testing.T, c *testkit.RFB, n int, untilOne bool) [][]byte {
	t.Helper()
	var cuts [][]byte
	for range n {
		if err := c.Request(0, 0, 1, 1, false); err != nil {
			t.Fatal(err)
		}
		u, err := c.ReadUpdate(nil)
		if err != nil {
			t.Fatalf("rfb: %v", err)
		}
		if cuts = append(cuts, u.Cuts...); untilOne && len(cuts) > 0 {
			break
		}
	}
	return cuts
}

// hostOf and tokenOf split a view link.
func hostOf(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatalf("link %q: %v", link, err)
	}
	return u.Host
}

func tokenOf(t *testing.T, link string) string {
	t.Helper()
	_, tok, ok := strings.Cut(link, "#")
	if !ok || !strings.HasPrefix(tok, "dt_") {
		t.Fatalf("link without a token")
	}
	return tok
}

// exchangeRes exchanges a token as the page does, view-only or not.
func (e *deskEnv) exchangeRes(t *testing.T, host, token string, viewOnly bool) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", "https://"+host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q, "view_only": %v}`, token, viewOnly)))
	req.Header.Set("Origin", "https://"+host)
	req.Header.Set("Content-Type", "application/json")
	res, err := e.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// exchange returns the session's cookie, failing the test without one.
func (e *deskEnv) exchange(t *testing.T, host, token string, viewOnly bool) string {
	t.Helper()
	res := e.exchangeRes(t, host, token, viewOnly)
	for _, c := range res.Cookies() {
		if c.Name == "__Host-froog_desktop" {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("exchange on %s: %d, no session", host, res.StatusCode)
	return ""
}

type viewState struct {
	ViewOnly  bool      `json:"view_only"`
	Locked    bool      `json:"locked"`
	ExpiresAt time.Time `json:"expires_at"`
}

// state is GET /session with a cookie.
func (e *deskEnv) state(t *testing.T, host, cookie string) viewState {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://"+host+"/session", nil)
	req.Header.Set("Cookie", cookie)
	res, err := e.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st viewState
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /session on %s: %d %v", host, res.StatusCode, err)
	}
	return st
}

// wallSession is an open wall's session.
type wallSession struct {
	e      *deskEnv
	host   string
	cookie string
}

func (e *deskEnv) wallSession(t *testing.T) *wallSession {
	t.Helper()
	link := e.wallLink(t)
	w := &wallSession{e: e, host: hostOf(t, link)}
	w.cookie = e.exchange(t, w.host, tokenOf(t, link), false)
	return w
}

// live asks the wall for a tile's link (mode view, use or open).
func (w *wallSession) live(t *testing.T, sandboxID, mode string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", "https://"+w.host+"/live", strings.NewReader(fmt.Sprintf(`{"sandbox_id": %q, "mode": %q}`, sandboxID, mode)))
	req.Header.Set("Origin", "https://"+w.host)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", w.cookie)
	var out struct{ URL string }
	var status int
	wait.For(t, 30*time.Second, "the wall to show the sandbox", func() bool {
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(strings.NewReader(fmt.Sprintf(`{"sandbox_id": %q, "mode": %q}`, sandboxID, mode)))
		res, err := w.e.web.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		status = res.StatusCode
		return status == 200 && json.NewDecoder(res.Body).Decode(&out) == nil
	})
	return out.URL
}
