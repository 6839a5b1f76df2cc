package edge_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/store"
)

// A composite URL: its own port serves every path but the prefixes its
// owner routed to other ports of the sandbox, the longest prefix first;
// one token cookie, stripped on every route; websockets and streams on a
// route; a route's port with nothing on it is the one the page names.
func TestPathRoutes(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	// An app that says its name and the target it got.
	named := func(name string) int {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			fmt.Fprint(w, name+" "+req.RequestURI)
		}))
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().(*net.TCPAddr).Port
	}
	frontPort, v2 := named("front"), named("v2")
	api, ws, closed := echo(t), wsEcho(t), loopback.FreePort(t)
	const tok = "pt_paths"
	r.host("paths-1-rrrrrr", frontPort, false, tok)
	if _, err := r.st.PutURL(ctx, r.sb.ID, frontPort, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.Routes = []store.PathRoute{{Prefix: "/api/", Port: api}, {Prefix: "/ws/", Port: ws}, {Prefix: "/down/", Port: closed}, {Prefix: "/api/v2/", Port: v2}}
		return u, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	base := "https://paths-1-rrrrrr." + domain
	eventually(t, "the routes reach the edge", func() bool {
		res, b := do(t, r.client(r.addr, false), "GET", base+"/api/x", "X-Froog-Url-Token", tok)
		return res.StatusCode == 200 && !strings.HasPrefix(string(b), "front")
	})
	for _, h2 := range []bool{false, true} {
		c := r.client(r.addr, h2)
		// The token's visit sets the one cookie; the address loses it.
		res, _ := do(t, c, "GET", base+"/api/x?_token="+tok)
		cookie := res.Header.Get("Set-Cookie")
		if res.StatusCode != 302 || res.Header.Get("Location") != base+"/api/x" || !strings.HasPrefix(cookie, "__Host-froog_url="+tok+";") {
			t.Fatalf("h2=%v: the token's visit: %d %q %q", h2, res.StatusCode, res.Header.Get("Location"), cookie)
		}
		cookie = "__Host-froog_url=" + tok + "; sid=1"
		for _, tc := range []struct {
			path string
			app  string // the app that answers
		}{
			{"/", "front"},
			{"/index.html?q=1", "front"},
			{"/api", "front"}, // not under /api/
			{"/api/users/7?x=1", "api"},
			{"/api/v2/users", "v2"}, // the longest prefix
			{"/API/x", "front"},
			{"/%61pi/x", "front"}, // matched as sent
			{"/api/../x", "front"},
			{"/api/%2e%2e/x", "front"},
		} {
			res, b := do(t, c, "GET", base+tc.path, "Cookie", cookie)
			if res.StatusCode != 200 {
				t.Fatalf("h2=%v GET %s: %d %s", h2, tc.path, res.StatusCode, b)
			}
			if tc.app != "api" {
				if string(b) != tc.app+" "+tc.path {
					t.Errorf("h2=%v GET %s: %q, want %s's answer to the path as sent", h2, tc.path, b, tc.app)
				}
				continue
			}
			var s seen
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("h2=%v GET %s: %v: %s", h2, tc.path, err, b)
			}
			// The prefix is forwarded as it is; the app gets neither the
			// token nor its cookie, the other cookies as sent.
			if s.URI != tc.path || s.Header.Get("Cookie") != "sid=1" || s.Host != "paths-1-rrrrrr."+domain {
				t.Errorf("h2=%v GET %s: the app got %s with Cookie %q, Host %q", h2, tc.path, s.URI, s.Header.Get("Cookie"), s.Host)
			}
		}
		// Without the token nothing is routed anywhere.
		if res, _ := do(t, c, "GET", base+"/api/x"); res.StatusCode != 401 {
			t.Fatalf("h2=%v: /api/ without the token: %d, want 401", h2, res.StatusCode)
		}
	}
	// The page names the route's port, not the URL's.
	if p := getProblem(t, r, base+"/down/x", "X-Froog-Url-Token", tok); p.Port != closed || !lists(p, api) {
		t.Fatalf("a route's port with nothing on it: port %d, listening %v; want %d, and %d among them", p.Port, p.Listening, closed, api)
	}
	res, page := do(t, r.client(r.addr, true), "GET", base+"/down/", "X-Froog-Url-Token", tok, "Sec-Fetch-Mode", "navigate")
	if res.StatusCode != 502 || !strings.Contains(string(page), "<h1>Nothing is listening on "+strconv.Itoa(closed)+"</h1>") {
		t.Fatalf("the page: %d %s", res.StatusCode, page)
	}
	// A websocket on a route reaches its port, with the cookie.
	d := websocket.Dialer{
		NetDialContext:  func(ctx context.Context, network, _ string) (net.Conn, error) { return net.Dial(network, r.addr) },
		TLSClientConfig: &tls.Config{RootCAs: r.ca.Pool(), NextProtos: []string{"http/1.1"}},
	}
	conn, wres, err := d.Dial("wss://paths-1-rrrrrr."+domain+"/ws/echo", http.Header{"Cookie": {"__Host-froog_url=" + tok}})
	if err != nil {
		t.Fatalf("websocket on /ws/: %v (%v)", err, wres)
	}
	defer conn.Close()
	if err := conn.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, got, err := conn.ReadMessage(); err != nil || string(got) != "hi" {
		t.Fatalf("websocket echo: %q, %v", got, err)
	}
}
