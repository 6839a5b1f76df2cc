package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/wait"
)

// A composite URL through froogd dev: / is served by one port of the
// sandbox, /api/ by another, behind one private URL and one cookie. The
// token's visit sets the cookie once; then both paths work with it, over
// HTTP/2 and HTTP/1.1, each app getting the path whole and no token; a
// websocket upgrade on /api/ reaches the second port.
func TestCompositeURLE2E(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	newSandbox(t, d.c, "cmp", 15*time.Second)
	front := serveApp(t, d.c, "cmp", "echo.py", headerEcho)
	api := serveApp(t, d.c, "cmp", "ws.py", wsEcho)
	var u struct {
		URL, Host string
		Routes    []struct {
			Prefix string
			Port   int
		}
	}
	d.c.call("POST", "/v1/sandboxes/cmp/urls", fmt.Sprintf(`{"port": %d, "routes": [{"prefix": "/api/", "port": %d}]}`, front, api), 201, &u)
	if len(u.Routes) != 1 || u.Routes[0].Prefix != "/api/" || u.Routes[0].Port != api {
		t.Fatalf("the URL's routes: %+v", u.Routes)
	}
	link, err := url.Parse(u.URL)
	if err != nil || link.Query().Get("_token") == "" {
		t.Fatalf("the URL's link holds no token (%v)", err)
	}
	base := "https://" + link.Host
	link.Path = "/api/"
	for _, h2 := range []bool{true, false} {
		c := d.web(h2)
		// The token's visit: a redirect that sets the one cookie (the first
		// waits for the certificate and the route).
		var cookie *http.Cookie
		wait.For(t, 20*time.Second, "the token's visit sets the cookie", func() bool {
			res, _ := visit(t, c, "GET", link.String())
			for _, ck := range res.Cookies() {
				if ck.Name == "__Host-froog_url" {
					cookie = ck
				}
			}
			return res.StatusCode == 302 && res.Header.Get("Location") == base+"/api/" && cookie != nil
		})
		jar := cookie.Name + "=" + cookie.Value + "; sid=1"
		// / is the front's, the path as sent, no token in its cookies.
		for _, path := range []string{"/", "/index.html?q=1", "/api", "/api/../x"} {
			res, body := visit(t, c, "GET", base+path, "Cookie", jar)
			var seen struct {
				Path    string
				Headers [][2]string
			}
			if res.StatusCode != 200 || json.Unmarshal([]byte(body), &seen) != nil || seen.Path != path {
				t.Fatalf("h2=%v GET %s: %d %q, want the front's echo of %s", h2, path, res.StatusCode, body, path)
			}
			if slices.ContainsFunc(seen.Headers, func(h [2]string) bool { return strings.Contains(h[1], cookie.Value) }) {
				t.Fatalf("h2=%v GET %s: the front got the token: %v", h2, path, seen.Headers)
			}
		}
		// /api/ is the second port's, the prefix kept.
		for _, path := range []string{"/api/", "/api/users/7?x=1"} {
			if res, body := visit(t, c, "GET", base+path, "Cookie", jar); res.StatusCode != 200 || body != "ws-echo "+path+" cookie=sid=1" {
				t.Fatalf("h2=%v GET %s: %d %q, want the second port's answer with cookie sid=1 alone", h2, path, res.StatusCode, body)
			}
		}
		if res, _ := visit(t, c, "GET", base+"/api/users"); res.StatusCode != 401 {
			t.Fatalf("h2=%v: /api/ without the cookie: %d, want 401", h2, res.StatusCode)
		}
		// A websocket on /api/, with the cookie, reaches the second port.
		if !h2 {
			tr := c.Transport.(*http.Transport)
			dl := websocket.Dialer{NetDialContext: tr.DialContext, TLSClientConfig: tr.TLSClientConfig.Clone()}
			dl.TLSClientConfig.NextProtos = []string{"http/1.1"}
			ws, res, err := dl.Dial("wss://"+link.Host+"/api/socket", http.Header{"Cookie": {jar}})
			if err != nil {
				t.Fatalf("websocket on /api/: %v (%v)", err, res)
			}
			defer ws.Close()
			if err := ws.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "hi" {
				t.Fatalf("websocket echo on /api/: %q %v", msg, err)
			}
		}
	}
}
