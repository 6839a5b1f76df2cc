package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// seenApp answers every request with what it saw (method, path,
// Froog-Replay, body) as JSON, appends the same line to seen.log in the
// sandbox, and sets a cookie of its own.
const seenApp = `import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def seen(self):
        n = int(self.headers.get("Content-Length") or 0)
        s = {"method": self.command, "path": self.path, "replay": self.headers.get("Froog-Replay", ""), "body": self.rfile.read(n).decode()}
        line = json.dumps(s)
        with open("seen.log", "a") as f:
            f.write(line + "\n")
        out = line.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "sess=app-cookie-value-42; Path=/")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = seen
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// exchangeJSON is an exchange as GET …/requests shows it.
type exchangeJSON struct {
	ID, Method, Path, Query string
	ReplayOf                string `json:"replay_of"`
	Status                  int
	Captured                bool
	Request, Response       *struct {
		Headers []struct{ Name, Value string }
		Body    string
	}
}

func (x exchangeJSON) header(name string) string {
	for _, h := range x.Request.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// The owner's traffic view through the real binary: with capture on,
// three requests to a private URL are listed newest first with their
// cookies, credentials and token redacted; a replay reaches the app with
// the same method, path and body and Froog-Replay, and is listed as a
// replay; with capture off, nothing of the headers or bodies is kept.
func TestTrafficCaptureReplay(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	c := d.c
	newSandbox(t, c, "traffic", 30*time.Second)
	script, _ := json.Marshal(seenApp)
	c.call("POST", "/v1/sandboxes/traffic/exec", `{"command": "cat > seen.py", "stdin": `+string(script)+`}`, 200, nil)
	port := loopback.FreePort(t)
	c.call("POST", "/v1/sandboxes/traffic/jobs", fmt.Sprintf(`{"command": "python3 seen.py %d"}`, port), 201, nil)
	var ready struct{ Ready bool }
	c.call("POST", "/v1/sandboxes/traffic/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, &ready)
	if !ready.Ready {
		t.Fatal("the app never listened")
	}
	var u struct {
		URL, Host string
		Capture   bool
	}
	c.call("POST", "/v1/sandboxes/traffic/urls", fmt.Sprintf(`{"port": %d, "capture": true}`, port), 201, &u)
	if !u.Capture {
		t.Fatal("capture: not on")
	}
	lu, _ := url.Parse(u.URL)
	token := lu.Query().Get("_token")
	web := d.web(false)
	send := func(method, target, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, "https://"+u.Host+target, strings.NewReader(body))
		req.Header.Set("X-Froog-Url-Token", token)
		req.Header.Set("Cookie", "sid=client-cookie-value-7")
		req.Header.Set("Authorization", "Bearer client-auth-value-9")
		res, err := web.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s %s: %d", method, target, res.StatusCode)
		}
	}
	send("GET", "/one", "")
	send("POST", "/two?x=1", `{"order": 2}`)
	send("PUT", "/three", "third body")

	path := fmt.Sprintf("/v1/sandboxes/traffic/urls/%d/requests", port)
	var list []exchangeJSON
	c.call("GET", path, "", 200, &list)
	if len(list) != 3 || list[0].Path != "/three" || list[1].Path != "/two" || list[1].Query != "x=1" || list[2].Path != "/one" {
		t.Fatalf("the list: %+v", list)
	}
	raw, _ := json.Marshal(list)
	for _, secret := range []string{token, "client-cookie-value-7", "client-auth-value-9", "app-cookie-value-42"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the list holds a secret: %s", raw)
		}
	}
	two := list[1]
	if !two.Captured || two.Request.Body != `{"order": 2}` || two.header("Cookie") != "sid=[redacted]" || two.header("Authorization") != "[redacted]" || two.header("X-Froog-Url-Token") != "" {
		t.Fatalf("the captured POST: %+v", two)
	}
	keep(t, "traffic-list.json", raw)

	var replay exchangeJSON
	c.call("POST", path+"/"+two.ID+"/replay", "", 200, &replay)
	if replay.ReplayOf != two.ID || replay.Status != 200 || replay.Method != "POST" || replay.Path != "/two" {
		t.Fatalf("the replay: %+v", replay)
	}
	var r struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/traffic/exec", `{"command": "tail -n 1 seen.log"}`, 200, &r)
	var seen struct{ Method, Path, Replay, Body string }
	if err := json.Unmarshal([]byte(r.Stdout), &seen); err != nil {
		t.Fatalf("seen.log: %v: %s", err, r.Stdout)
	}
	if seen.Method != "POST" || seen.Path != "/two?x=1" || seen.Body != `{"order": 2}` || seen.Replay != two.ID {
		t.Fatalf("the app saw the replay as %+v; want POST /two?x=1, the same body, Froog-Replay %s", seen, two.ID)
	}
	c.call("GET", path+"?limit=1", "", 200, &list)
	if len(list) != 1 || list[0].ID != replay.ID || list[0].ReplayOf != two.ID {
		t.Fatalf("the newest is not the replay: %+v", list)
	}
	c.call("POST", path+"/req_0000000000000000/replay", "", 404, nil)

	// Followed live: after the replay, the next request is an event.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path+"?follow=1&after="+replay.ID, nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	send("GET", "/five", "")
	var event exchangeJSON
	for sc := bufio.NewScanner(res.Body); event.ID == "" && sc.Scan(); {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &event); err != nil {
				t.Fatalf("follow: %v: %s", err, data)
			}
		}
	}
	if event.Path != "/five" || event.Method != "GET" || !event.Captured {
		t.Fatalf("follow: the first event after the replay is %+v, want GET /five captured", event)
	}
	cancel()

	// Capture off: what was captured goes; a new request keeps its
	// summary alone, and cannot be replayed.
	c.call("PATCH", fmt.Sprintf("/v1/sandboxes/traffic/urls/%d", port), `{"capture": false}`, 200, nil)
	var after []exchangeJSON
	wait.For(t, 10*time.Second, "a request kept uncaptured once capture is off", func() bool {
		send("POST", "/four", "fourth body")
		c.call("GET", path, "", 200, &after)
		return after[0].Path == "/four" && !after[0].Captured
	})
	for _, x := range after {
		if x.Captured || x.Request != nil {
			t.Fatalf("capture off: %s %s still captured", x.Method, x.Path)
		}
	}
	c.call("POST", path+"/"+after[0].ID+"/replay", "", 409, nil)
}

// Split roles on Postgres: two `froogd edge` serve their rings on
// --traffic-addr, and `froogd api --edge-traffic` reads both. Requests
// sent through each edge are listed together, newest first; a replay of
// one captured on the second edge is sent by that edge; an API without
// --edge-traffic answers 501.
func TestTrafficSplitRoles(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	caDir := t.TempDir()
	start(t, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey)
	var webs []*http.Client
	var rings []string
	for i := range 2 {
		_, m := start(t, regexp.MustCompile(`traffic for froogd api on (http://\S+)\n(?s:.*)froog edge on https://(\S+) `), "edge", "--database-url", db,
			"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test", "--ca-dir", caDir, "--control-key-file", ctlKey,
			"--secret-key-file", secret, "--traffic-addr", "127.0.0.1:0", "--rate-limit", "0")
		rings = append(rings, m[1])
		webs = append(webs, edgeClient(t, m[2], filepath.Join(caDir, "ca.pem"), i == 1))
	}
	api := func(extra ...string) client {
		_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), append([]string{"api", "--database-url", db, "--api-addr", "127.0.0.1:0",
			"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey}, extra...)...)
		return client{t: t, base: m[1], key: key}
	}
	c := api("--edge-traffic", strings.Join(rings, ","))
	_, host := hostEcho(t, c)
	port := echoPort(t, c)
	c.call("PATCH", "/v1/sandboxes/e2e/urls/"+port, `{"capture": true}`, 200, nil)
	var tok struct{ Token string }
	c.call("POST", "/v1/sandboxes/e2e/urls/"+port+"/tokens", `{"ttl_secs": 600}`, 201, &tok)
	get := func(i int, path string) bool {
		req, _ := http.NewRequest("POST", "https://"+host+path, strings.NewReader("from edge "+path))
		req.Header.Set("X-Froog-Url-Token", tok.Token)
		res, err := webs[i].Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode == 200
	}
	// Each edge learns the URL, and its capture, from the feed.
	for i := range webs {
		wait.For(t, 15*time.Second, fmt.Sprintf("edge %d captures", i), func() bool {
			if !get(i, fmt.Sprintf("/edge%d", i)) {
				return false
			}
			var list []exchangeJSON
			c.call("GET", "/v1/sandboxes/e2e/urls/"+port+"/requests?limit=1", "", 200, &list)
			return len(list) == 1 && list[0].Path == fmt.Sprintf("/edge%d", i) && list[0].Captured
		})
	}
	var list []exchangeJSON
	c.call("GET", "/v1/sandboxes/e2e/urls/"+port+"/requests", "", 200, &list)
	if len(list) < 2 || list[0].Path != "/edge1" || !slices.ContainsFunc(list, func(x exchangeJSON) bool { return x.Path == "/edge0" }) {
		t.Fatalf("the merged list: %+v", list)
	}
	var replay exchangeJSON
	c.call("POST", "/v1/sandboxes/e2e/urls/"+port+"/requests/"+list[0].ID+"/replay", "", 200, &replay)
	if replay.ReplayOf != list[0].ID || replay.Status != 200 || replay.Request.Body != "from edge /edge1" {
		t.Fatalf("the replay through the second edge: %+v", replay)
	}
	c.call("GET", "/v1/sandboxes/e2e/urls/"+port+"/requests?limit=1", "", 200, &list)
	if list[0].ID != replay.ID {
		t.Fatalf("the newest is not the replay: %+v", list[0])
	}
	api().call("GET", "/v1/sandboxes/e2e/urls/"+port+"/requests", "", 501, nil)
}
