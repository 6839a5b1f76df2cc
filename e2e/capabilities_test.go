package e2e_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// The capability table of docs/security.md, walked against the real
// binary: for every row and every event of its "Ended by" column, a
// fresh secret is minted, used, the event made to happen, and the next
// use must be refused. The rows and events the document lists and the
// ones this file knows how to walk must be the same, and every secret
// prefix and __Host- cookie in the source must have a row.

// capRow is how one row of the table is walked.
type capRow struct {
	// mint makes a fresh secret for the event about to be tested (some
	// rows mint differently per event: a URL cookie carries a viewer
	// token for expiry and revoke, the URL's own token otherwise).
	mint func(t *testing.T, r *capRig, event string) *minted
	// long: its lifetime is a day, not minutes (the expiry walk).
	long bool
}

// minted is one secret and what a test needs to end it.
type minted struct {
	sandbox string // its sandbox, when it has one
	port    int    // its URL's port, for URL rows
	tokenID string // a viewer token's id
	hookID  string // a webhook endpoint's id
	keyID   string // the API key it is, or that made it
	key     client // that key's client
	// use tries the secret once: "" when it opened what it opens, else
	// what was answered.
	use func() string
	// refusal, when set, is what a refusal must contain (an error code)
	// for the event: so that a refusal for another reason (a sandbox
	// stopped by the moved clock) does not pass for the one tested.
	refusal map[string]string
}

// capEvents says how each event of the document's vocabulary is made to
// happen to a minted secret. expiry is walked apart (it moves the clock
// of a froogd of its own).
var capEvents = map[string]func(t *testing.T, r *capRig, m *minted){
	"revoke": func(t *testing.T, r *capRig, m *minted) {
		if m.tokenID != "" {
			r.as(t).call("DELETE", fmt.Sprintf("/v1/sandboxes/%s/urls/%d/tokens/%s", m.sandbox, m.port, m.tokenID), "", 200, nil)
			return
		}
		r.as(t).call("DELETE", "/v1/api-keys/"+m.keyID, "", 200, nil)
	},
	"rotate": func(t *testing.T, r *capRig, m *minted) {
		var rot struct{ ID, Key string }
		r.as(t).call("POST", "/v1/api-keys/"+m.keyID+"/rotate", "", 200, &rot)
		if rot.ID != m.keyID || rot.Key == "" || rot.Key == m.key.key {
			t.Fatalf("rotate: got id %q and a new secret %v, want id %q and a new secret", rot.ID, rot.Key != m.key.key, m.keyID)
		}
		nc := client{t: t, base: r.admin.base, key: rot.Key}
		nc.call("GET", "/v1/limits", "", 200, nil) // the new secret works
	},
	"key-revoked": func(t *testing.T, r *capRig, m *minted) {
		r.as(t).call("DELETE", "/v1/api-keys/"+m.keyID, "", 200, nil)
	},
	"key-rotated": func(t *testing.T, r *capRig, m *minted) {
		r.as(t).call("POST", "/v1/api-keys/"+m.keyID+"/rotate", "", 200, nil)
	},
	"stop": func(t *testing.T, r *capRig, m *minted) {
		// Stopped, then started again: a new run, which the secret does
		// not belong to (stopped alone, nothing could open anyway).
		r.as(t).call("POST", "/v1/sandboxes/"+m.sandbox+"/stop", "", 202, nil)
		r.waitState(t, m.sandbox, "stopped")
		r.as(t).call("POST", "/v1/sandboxes/"+m.sandbox+"/start", "", 202, nil)
		r.waitState(t, m.sandbox, "running")
	},
	"delete": func(t *testing.T, r *capRig, m *minted) {
		r.as(t).call("DELETE", "/v1/sandboxes/"+m.sandbox, "", 202, nil)
		// A new sandbox of the same name gets nothing of the old one's.
		r.as(t).call("POST", "/v1/sandboxes", fmt.Sprintf(`{"name": %q}`, m.sandbox), 202, nil)
		r.waitState(t, m.sandbox, "running")
	},
	"url-rehosted": func(t *testing.T, r *capRig, m *minted) {
		r.as(t).call("POST", "/v1/sandboxes/"+m.sandbox+"/urls", fmt.Sprintf(`{"port": %d}`, m.port), 200, nil)
	},
	"url-public": func(t *testing.T, r *capRig, m *minted) {
		// Public, then private again: the tokens it had do not come back.
		r.as(t).call("POST", "/v1/sandboxes/"+m.sandbox+"/urls", fmt.Sprintf(`{"port": %d, "public": true}`, m.port), 200, nil)
		r.as(t).call("POST", "/v1/sandboxes/"+m.sandbox+"/urls", fmt.Sprintf(`{"port": %d}`, m.port), 200, nil)
	},
	"url-removed": func(t *testing.T, r *capRig, m *minted) {
		r.as(t).call("DELETE", fmt.Sprintf("/v1/sandboxes/%s/urls/%d", m.sandbox, m.port), "", 200, nil)
	},
	"webhook-rotated": func(t *testing.T, r *capRig, m *minted) {
		var rot struct{ ID, Secret string }
		r.as(t).call("POST", "/v1/webhooks/"+m.hookID+"/rotate", "", 200, &rot)
		if rot.ID != m.hookID || rot.Secret == "" {
			t.Fatalf("rotate: got %q and a secret %v, want %q and a new secret", rot.ID, rot.Secret != "", m.hookID)
		}
	},
	"webhook-removed": func(t *testing.T, r *capRig, m *minted) {
		r.as(t).call("DELETE", "/v1/webhooks/"+m.hookID, "", 200, nil)
	},
	"url-renamed": func(t *testing.T, r *capRig, m *minted) {
		r.as(t).call("POST", "/v1/sandboxes/"+m.sandbox+"/urls", fmt.Sprintf(`{"port": %d, "subdomain": "%s-renamed"}`, m.port, m.sandbox), 200, nil)
	},
}

// capRows are the table's rows by their Secret column.
var capRows = map[string]capRow{
	"API key": {mint: func(t *testing.T, r *capRig, event string) *minted {
		id, c := r.newKey(t, `"preset": "read-only", "ttl_days": 1`)
		return &minted{keyID: id, key: c, use: func() string { return httpStatus("GET", c.base+"/v1/sandboxes", bearer(c.key), "", 200) },
			refusal: map[string]string{"expiry": "api_key_expired"}}
	}, long: true},
	"URL token": {mint: func(t *testing.T, r *capRig, event string) *minted {
		m := r.privateURL(t)
		host, tok := m.host, m.token
		m.use = func() string { return r.visit(host, "X-Froog-Url-Token", tok) }
		return m.minted
	}},
	"Viewer token": {mint: func(t *testing.T, r *capRig, event string) *minted {
		m := r.privateURL(t)
		id, tok := r.viewerToken(t, m)
		m.tokenID, m.use = id, func() string { return r.visit(m.host, "X-Froog-Url-Token", tok) }
		return m.minted
	}},
	"URL cookie": {mint: func(t *testing.T, r *capRig, event string) *minted {
		m := r.privateURL(t)
		tok := m.token
		if event == "expiry" || event == "revoke" {
			m.tokenID, tok = r.viewerToken(t, m)
		}
		cookie := r.urlCookie(t, m.host, tok)
		m.use = func() string { return r.visit(m.host, "Cookie", cookie) }
		return m.minted
	}},
	"Desktop link":    {mint: func(t *testing.T, r *capRig, event string) *minted { return r.linkRow(t, "desktop") }},
	"Wall link":       {mint: func(t *testing.T, r *capRig, event string) *minted { return r.linkRow(t, "wall") }},
	"Desktop session": {mint: func(t *testing.T, r *capRig, event string) *minted { return r.sessionRow(t, "desktop") }},
	"Wall session":    {mint: func(t *testing.T, r *capRig, event string) *minted { return r.sessionRow(t, "wall") }, long: true},
	"Wall session, Use": {mint: func(t *testing.T, r *capRig, event string) *minted {
		m, cookie := r.viewSession(t, "wall")
		var sb struct{ ID string }
		r.as(t).call("GET", "/v1/sandboxes/"+r.sandbox(t), "", 200, &sb)
		m.use = func() string {
			// The wall lists what runs from the route table: the new
			// sandbox may take a moment to be on it.
			var why string
			wait.Until(5*time.Second, func() bool {
				why = httpStatusWith(r.https, "POST", "https://"+m.host+"/live", map[string]string{"Cookie": cookie, "Origin": "https://" + m.host,
					"Content-Type": "application/json"}, fmt.Sprintf(`{"sandbox_id": %q, "mode": "use"}`, sb.ID), 200)
				return !strings.Contains(why, "wrong_view")
			})
			return why
		}
		m.refusal = map[string]string{"expiry": "link_expired"}
		return m.minted
	}},
	// A signing secret opens nothing in froog: it is used when froog signs
	// a ping with it, and the receiver's check passes.
	"Webhook signing secret": {mint: func(t *testing.T, r *capRig, event string) *minted {
		var h struct{ ID, Secret string }
		r.as(t).call("POST", "/v1/webhooks", fmt.Sprintf(`{"url": %q}`, r.hooks.srv.URL+"/cap"), 201, &h)
		r.hooks.tell(h.ID, h.Secret)
		t.Cleanup(func() { httpStatus("DELETE", r.admin.base+"/v1/webhooks/"+h.ID, bearer(r.admin.key), "", 200) })
		return &minted{hookID: h.ID, use: func() string {
			req, _ := http.NewRequest("POST", r.admin.base+"/v1/webhooks/"+h.ID+"/test", nil)
			req.Header.Set("Authorization", "Bearer "+r.admin.key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err.Error()
			}
			defer res.Body.Close()
			var a struct {
				EventID string `json:"event_id"`
				Status  string
			}
			if b, _ := io.ReadAll(res.Body); res.StatusCode != 200 || json.Unmarshal(b, &a) != nil {
				return fmt.Sprintf("test: %d %s", res.StatusCode, b)
			}
			for _, q := range r.hooks.requests() {
				if q.Delivery == a.EventID && q.Webhook == h.ID {
					if !q.Verified {
						return "the ping does not verify with the secret"
					}
					return ""
				}
			}
			return "the receiver got no ping (" + a.Status + ")"
		}}
	}},
	// A ticket opens no request: it resumes the TLS session it came from,
	// at any edge; used, it resumes, and past its key's life it does not.
	"TLS session ticket": {mint: func(t *testing.T, r *capRig, event string) *minted {
		host := r.privateURL(t).host
		tr := r.https.Transport.(*http.Transport)
		cache := tls.NewLRUClientSessionCache(1)
		connect := func() string {
			c, err := tr.DialContext(context.Background(), "tcp", host+":443")
			if err != nil {
				return err.Error()
			}
			tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: tr.TLSClientConfig.RootCAs, ClientSessionCache: cache})
			defer tc.Close()
			// A request read to its end: TLS 1.3 sends the ticket after
			// the handshake, and the client keeps it as it reads.
			fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
			if _, err := io.Copy(io.Discard, tc); err != nil {
				return err.Error()
			}
			if !tc.ConnectionState().DidResume {
				return "a full handshake: the ticket did not resume the session"
			}
			return ""
		}
		connect() // the ticket
		return &minted{use: connect}
	}, long: true},
	"Signed file link": {mint: func(t *testing.T, r *capRig, event string) *minted {
		name := r.sandbox(t)
		id, c := r.newKey(t, `"preset": "admin"`)
		c.call("PUT", "/v1/sandboxes/"+name+"/files/content?path=cap.txt", "capability", 200, nil)
		var l struct{ URL string }
		c.call("POST", "/v1/sandboxes/"+name+"/files/download-url", `{"path": "cap.txt", "expires_in": 60}`, 200, &l)
		return &minted{sandbox: name, keyID: id, key: c, use: func() string { return httpStatus("GET", l.URL, nil, "", 200) }}
	}},
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	rows, events := capTable(t)
	t.Run("every secret has a row", func(t *testing.T) {
		t.Parallel()
		forms := strings.Join(slices.Collect(mapValues(rows, func(r capDoc) string { return r.form })), " ")
		secrets := sourceSecrets(t)
		t.Logf("what the source hands out: %q", secrets)
		for _, s := range secrets {
			if !strings.Contains(forms, "`"+s) {
				t.Errorf("the source hands out %q, which docs/security.md's table has no row for", s)
			}
		}
	})
	for name, doc := range rows {
		if _, ok := capRows[name]; !ok {
			if len(doc.ends) > 0 {
				t.Errorf("docs/security.md has a row %q that this test does not walk", name)
			}
			continue
		}
		for _, ev := range doc.ends {
			if _, ok := events[ev]; !ok {
				t.Errorf("row %q is ended by %q, which the events table does not define", name, ev)
			}
			if _, ok := capEvents[ev]; !ok && ev != "expiry" {
				t.Errorf("row %q is ended by %q, which this test cannot make happen", name, ev)
			}
		}
	}
	for name := range capRows {
		if _, ok := rows[name]; !ok {
			t.Errorf("this test walks %q, which docs/security.md's table has no row for", name)
		}
	}
	if t.Failed() {
		return
	}

	t.Run("events", func(t *testing.T) {
		t.Parallel()
		r := newCapRig(t)
		for name, doc := range rows {
			for _, ev := range doc.ends {
				if ev == "expiry" {
					continue
				}
				t.Run(name+"/"+ev, func(t *testing.T) {
					t.Parallel()
					m := capRows[name].mint(t, r, ev)
					if why := m.use(); why != "" {
						t.Fatalf("before %s: refused: %s", ev, why)
					}
					capEvents[ev](t, r, m)
					r.refused(t, m, ev)
				})
			}
		}
	})

	// Expiry moves the clock of a froogd of its own: every expiring
	// secret is minted and used first, then the clock passes the short
	// lifetimes (minutes: tokens, links, sessions), then a day (API keys,
	// which must still work after the first move).
	t.Run("expiry", func(t *testing.T) {
		t.Parallel()
		r := newCapRig(t)
		type exp struct {
			name string
			m    *minted
		}
		var short, long []exp
		for name, doc := range rows {
			if !slices.Contains(doc.ends, "expiry") {
				continue
			}
			m := capRows[name].mint(t, r, "expiry")
			if why := m.use(); why != "" {
				t.Fatalf("%s before expiry: refused: %s", name, why)
			}
			if capRows[name].long {
				long = append(long, exp{name, m})
			} else {
				short = append(short, exp{name, m})
			}
		}
		r.advance(t, 11*time.Minute)
		for _, e := range short {
			t.Run(e.name, func(t *testing.T) { r.refused(t, e.m, "expiry") })
		}
		for _, e := range long {
			if why := e.m.use(); why != "" {
				t.Fatalf("%s refused 11 minutes into a day's lifetime: %s", e.name, why)
			}
		}
		r.advance(t, 24*time.Hour)
		for _, e := range long {
			t.Run(e.name, func(t *testing.T) { r.refused(t, e.m, "expiry") })
		}
	})
}

// refused checks that m's next use after ev is refused, for ev's reason
// when the row says what that looks like. The edge learns of a change
// through the feed, so a use may still pass for a moment.
func (r *capRig) refused(t *testing.T, m *minted, ev string) {
	t.Helper()
	var why string
	wait.For(t, 5*time.Second, "the secret refused after "+ev, func() bool {
		why = m.use()
		return why != ""
	})
	if want := m.refusal[ev]; want != "" && !strings.Contains(why, want) {
		t.Fatalf("after %s: refused with %s, want %s", ev, why, want)
	}
}

// capRig is froogd dev with a test clock, the account's admin key, and a
// client for the edge that trusts its CA.
type capRig struct {
	*dev
	hooks *hookReceiver // the webhook endpoints' receiver
	admin client
	https *http.Client // reaches the edge, trusting its CA
	n     atomic.Int32
}

func newCapRig(t *testing.T) *capRig {
	// An account with room: every case makes sandboxes, starts and URL
	// names of its own, past the docs' limits for one account.
	hooks := newHookReceiver(t)
	d := startDev(t, devOptions{clock: true, env: []string{hooks.env()}, args: []string{"--rate-limit", "0", "--capacity", "100"}, prepare: func(data string) string {
		acct := froogdRun(t, "admin", "create-account", "--data", data, "--name", "capabilities", "--max-sandboxes", "100",
			"--starts-per-minute", "500", "--starts-per-hour", "5000", "--starts-per-day", "50000", "--url-names-per-day", "500")
		return froogdRun(t, "admin", "api-key", "create", "--data", data, "--account", acct, "--preset", "admin")
	}})
	return &capRig{dev: d, hooks: hooks, admin: d.c, https: d.web(true)}
}

// as is the admin key's client for t.
func (r *capRig) as(t *testing.T) client { return client{t: t, base: r.admin.base, key: r.admin.key} }

// sandbox makes a running sandbox of a name of its own.
func (r *capRig) sandbox(t *testing.T) string {
	name := fmt.Sprintf("cap-%d", r.n.Add(1))
	c := r.as(t)
	c.call("POST", "/v1/sandboxes", fmt.Sprintf(`{"name": %q}`, name), 202, nil)
	t.Cleanup(func() { httpStatus("DELETE", r.admin.base+"/v1/sandboxes/"+name, bearer(r.admin.key), "", 202) })
	r.waitState(t, name, "running")
	return name
}

func (r *capRig) waitState(t *testing.T, name, state string) {
	c := r.as(t)
	wait.For(t, 20*time.Second, name+" "+state, func() bool {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
		return sb.State == state
	})
}

// newKey makes an API key with the admin key and returns its id and a
// client with it.
func (r *capRig) newKey(t *testing.T, scope string) (string, client) {
	var k struct{ ID, Key string }
	c := r.as(t)
	c.call("POST", "/v1/api-keys", fmt.Sprintf(`{"label": "cap-%d", %s}`, r.n.Add(1), scope), 201, &k)
	if k.ID == "" || k.Key == "" {
		t.Fatalf("POST /v1/api-keys gave id %q and a key of %d bytes", k.ID, len(k.Key))
	}
	return k.ID, client{t: t, base: r.admin.base, key: k.Key}
}

// hostedURL is a private URL to a running app.
type hostedURL struct {
	*minted
	host, token string
}

// privateURL serves an app in a new sandbox behind a private URL.
func (r *capRig) privateURL(t *testing.T) hostedURL {
	name := r.sandbox(t)
	c := r.as(t)
	port := serveIn(t, c, name, "python3 -m http.server %d --bind 127.0.0.1")
	var u struct{ URL, Host string }
	c.call("POST", "/v1/sandboxes/"+name+"/urls", fmt.Sprintf(`{"port": %d}`, port), 201, &u)
	lu, err := url.Parse(u.URL)
	if err != nil {
		t.Fatal(err)
	}
	return hostedURL{minted: &minted{sandbox: name, port: port}, host: u.Host, token: lu.Query().Get("_token")}
}

// viewerToken makes a viewer token of a minute for m's URL.
func (r *capRig) viewerToken(t *testing.T, m hostedURL) (id, token string) {
	var tk struct{ ID, Token string }
	c := r.as(t)
	c.call("POST", fmt.Sprintf("/v1/sandboxes/%s/urls/%d/tokens", m.sandbox, m.port), `{"ttl_secs": 60}`, 201, &tk)
	return tk.ID, tk.Token
}

// urlCookie opens host with ?_token= as a browser would and returns the
// cookie the edge set, as a Cookie header.
func (r *capRig) urlCookie(t *testing.T, host, token string) string {
	res, err := r.https.Get("https://" + host + "/?_token=" + url.QueryEscape(token))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "__Host-froog_url" {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("?_token= answered %d with no __Host-froog_url cookie", res.StatusCode)
	return ""
}

// visit GETs host/ through the edge with one header.
func (r *capRig) visit(host, name, value string) string {
	return httpStatusWith(r.https, "GET", "https://"+host+"/", map[string]string{name: value}, "", 200)
}

// viewLink makes a desktop or wall link with a key of its own (so that
// the key can be revoked or rotated), for a new running sandbox.
type viewLinkMinted struct {
	*minted
	host, token string
}

func (r *capRig) viewLink(t *testing.T, kind string) viewLinkMinted {
	id, c := r.newKey(t, `"preset": "admin"`)
	m := &minted{keyID: id, key: c}
	path := "/v1/wall"
	if kind != "wall" {
		m.sandbox = r.sandbox(t)
		path = "/v1/sandboxes/" + m.sandbox + "/" + kind
	}
	var l struct{ URL string }
	c.call("POST", path, "", 201, &l)
	u, err := url.Parse(l.URL)
	if err != nil || !strings.HasPrefix(u.Fragment, "dt_") {
		t.Fatalf("%s link %q: no dt_ token after #", kind, l.URL)
	}
	return viewLinkMinted{minted: m, host: u.Host, token: u.Fragment}
}

// linkRow mints a desktop or wall link, used by exchanging it.
func (r *capRig) linkRow(t *testing.T, kind string) *minted {
	m := r.viewLink(t, kind)
	m.use = func() string { _, why := r.exchange(m.host, m.token); return why }
	m.refusal = map[string]string{"expiry": "link_expired"}
	return m.minted
}

// viewSession mints a desktop or wall link and exchanges it.
func (r *capRig) viewSession(t *testing.T, kind string) (viewLinkMinted, string) {
	m := r.viewLink(t, kind)
	cookie, why := r.exchange(m.host, m.token)
	if why != "" {
		t.Fatalf("exchange the %s link: %s", kind, why)
	}
	return m, cookie
}

// sessionRow mints a desktop or wall session, used by asking /session.
func (r *capRig) sessionRow(t *testing.T, kind string) *minted {
	m, cookie := r.viewSession(t, kind)
	m.use = func() string { return r.session(m.host, cookie) }
	m.refusal = map[string]string{"expiry": "no_session"}
	return m.minted
}

// exchange trades a link's token for a session cookie at host's
// /session, as the viewer page does.
func (r *capRig) exchange(host, token string) (cookie, why string) {
	req, _ := http.NewRequest("POST", "https://"+host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q}`, token)))
	req.Header.Set("Origin", "https://"+host)
	req.Header.Set("Content-Type", "application/json")
	res, err := r.https.Do(req)
	if err != nil {
		return "", err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return "", fmt.Sprintf("%d %s", res.StatusCode, b)
	}
	for _, c := range res.Cookies() {
		if c.Name == "__Host-froog_desktop" {
			return c.Name + "=" + c.Value, ""
		}
	}
	return "", "200 with no session cookie"
}

// session asks host's /session about the session in cookie: the check
// every new connection of the session passes.
func (r *capRig) session(host, cookie string) string {
	return httpStatusWith(r.https, "GET", "https://"+host+"/session", map[string]string{"Cookie": cookie}, "", 200)
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

// httpStatus sends one request and returns "" when it got want, else the
// status and body.
func httpStatus(method, u string, headers map[string]string, body string, want int) string {
	return httpStatusWith(http.DefaultClient, method, u, headers, body, want)
}

func httpStatusWith(c *http.Client, method, u string, headers map[string]string, body string, want int) string {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return err.Error()
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode == want {
		return ""
	}
	return fmt.Sprintf("%d %s", res.StatusCode, b)
}

// serveIn starts command (with %d for a free port) as a job in sandbox
// name and waits for its port.
func serveIn(t *testing.T, c client, name, command string) int {
	t.Helper()
	port := loopback.FreePort(t)
	body, _ := json.Marshal(map[string]string{"command": fmt.Sprintf(command, port)})
	c.call("POST", "/v1/sandboxes/"+name+"/jobs", string(body), 201, nil)
	var w struct{ Ready bool }
	c.call("POST", "/v1/sandboxes/"+name+"/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, &w)
	if !w.Ready {
		t.Fatalf("%q never listened on %d", command, port)
	}
	return port
}

// capDoc is one row of docs/security.md's table.
type capDoc struct {
	form string
	ends []string
}

// capTable reads docs/security.md: the capability table's rows by
// Secret, and the events table's names.
func capTable(t *testing.T) (map[string]capDoc, map[string]bool) {
	f, err := os.Open("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, events := map[string]capDoc{}, map[string]bool{}
	tick := regexp.MustCompile("`([a-z-]+)`")
	var table string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| Secret |"):
			table = "capabilities"
		case strings.HasPrefix(line, "| Event |"):
			table = "events"
		case !strings.HasPrefix(line, "|"):
			table = ""
		case strings.HasPrefix(line, "|---"):
		case table == "capabilities":
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) != 6 {
				t.Fatalf("docs/security.md: a capability row of %d cells, want 6: %s", len(cells), line)
			}
			d := capDoc{form: strings.TrimSpace(cells[1])}
			if end := strings.TrimSpace(cells[5]); !strings.HasPrefix(end, "—") {
				for _, m := range tick.FindAllStringSubmatch(end, -1) {
					d.ends = append(d.ends, m[1])
				}
				if len(d.ends) == 0 {
					t.Fatalf("docs/security.md: row %s is ended by nothing", cells[0])
				}
			}
			rows[strings.TrimSpace(cells[0])] = d
		case table == "events":
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for _, m := range tick.FindAllStringSubmatch(cells[0], -1) {
				events[m[1]] = true
			}
		}
	}
	if len(rows) == 0 || len(events) == 0 {
		t.Fatal("docs/security.md has no capability or events table")
	}
	return rows, events
}

// sourceSecrets lists what the source hands out as secrets: the values
// of string constants named …Prefix that end in "_" (token prefixes), and
// every "__Host-" cookie name.
func sourceSecrets(t *testing.T) []string {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) && strings.HasSuffix(id.Name, "Prefix") {
						if s, ok := stringLit(n.Values[i]); ok && strings.HasSuffix(s, "_") {
							out = append(out, s)
						}
					}
				}
			case *ast.BasicLit:
				if s, ok := stringLit(n); ok && regexp.MustCompile(`^__Host-[A-Za-z0-9_-]+$`).MatchString(s) {
					out = append(out, s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	if len(out) < 4 {
		t.Fatalf("found only %q in the source: the scan is broken", out)
	}
	return slices.Compact(out)
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func mapValues[K comparable, V, W any](m map[K]V, f func(V) W) func(func(W) bool) {
	return func(yield func(W) bool) {
		for _, v := range m {
			if !yield(f(v)) {
				return
			}
		}
	}
}
