package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// Auto-start through the real binary: a request to a stopped sandbox
// with auto_start wakes it and is held until the app answers.
func TestAutoStart(t *testing.T) {
	// Alone: the edge holds a request 20 s of real time (wake.URLTimeout) while its sandbox starts; beside the other tests a start outlasted that.
	d := startDev(t, devOptions{args: []string{"--rate-limit", "0"}})
	c, web, web2 := d.c, d.web(false), d.web(true)

	state := func(name string) string {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
		return sb.State
	}
	stop := func(name string) {
		c.call("POST", "/v1/sandboxes/"+name+"/stop", "", 202, nil)
		wait.For(t, 15*time.Second, name+" stops", func() bool { return state(name) == "stopped" })
	}
	// autoStarts counts the sandbox.auto_start events by actor.
	autoStarts := func(actor string) int {
		var evs struct {
			Events []struct{ Action, Actor string }
		}
		c.call("GET", "/v1/audit", "", 200, &evs)
		n := 0
		for _, e := range evs.Events {
			if e.Action == "sandbox.auto_start" && strings.HasPrefix(e.Actor, actor) {
				n++
			}
		}
		return n
	}

	// A sandbox with auto_start, the header echo on a private URL.
	c.call("POST", "/v1/sandboxes", `{"name": "sleepy", "auto_start": true}`, 202, nil)
	wait.For(t, 15*time.Second, "sleepy runs", func() bool { return state("sleepy") == "running" })
	script, _ := json.Marshal(headerEcho)
	c.call("POST", "/v1/sandboxes/sleepy/exec", `{"command": "cat > echo.py", "stdin": `+string(script)+`}`, 200, nil)
	port := loopback.FreePort(t)
	c.call("POST", "/v1/sandboxes/sleepy/jobs", fmt.Sprintf(`{"command": "python3 echo.py %d"}`, port), 201, nil)
	c.call("POST", "/v1/sandboxes/sleepy/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, nil)
	var u struct{ URL, Host string }
	c.call("POST", "/v1/sandboxes/sleepy/urls", fmt.Sprintf(`{"port": %d}`, port), 201, &u)
	token := u.URL[strings.Index(u.URL, "_token=")+len("_token="):]
	base := "https://" + u.Host

	// Without the token: 401, and the sandbox stays stopped.
	stop("sleepy")
	if res, _ := visit(t, web, "GET", base+"/"); res.StatusCode != 401 {
		t.Fatalf("no token: %d", res.StatusCode)
	}
	res, _ := visit(t, web, "OPTIONS", base+"/", "Access-Control-Request-Method", "POST")
	if res.StatusCode != 503 {
		t.Fatalf("a preflight to a stopped private URL: %d, want 503", res.StatusCode)
	}
	if s := state("sleepy"); s != "stopped" || autoStarts("") != 0 {
		t.Fatalf("a request without a token woke the sandbox: %s", s)
	}

	// With it, one request answers 200 with the app's body.
	res, body := visit(t, web, "GET", base+"/hello", "X-Froog-Url-Token", token)
	if res.StatusCode != 200 || !strings.Contains(body, `"path": "/hello"`) {
		t.Fatalf("the first request to a stopped sandbox: %d %s", res.StatusCode, body)
	}
	if n := autoStarts("public-url"); n != 1 {
		t.Fatalf("%d auto_start events, want 1", n)
	}

	// 50 at once, both protocols: one start.
	stop("sleepy")
	var wg sync.WaitGroup
	codes := make(chan int, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := web
			if i%2 == 1 {
				cl = web2
			}
			req, _ := http.NewRequest("POST", base+"/hook", strings.NewReader("payload"))
			req.Header.Set("X-Froog-Url-Token", token)
			res, err := cl.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !bytes.Contains(b, []byte(`"body": "payload"`)) {
				t.Errorf("held POST: %d %s", res.StatusCode, b)
			}
			codes <- res.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Fatalf("a held request got %d", code)
		}
	}
	if n := autoStarts("public-url"); n != 2 {
		t.Fatalf("%d auto_start events after two wakes, want 2", n)
	}

	// A body over 1 MiB while starting: 503 sandbox_starting with
	// Retry-After, nothing reaches the app; the sandbox starts for the
	// retry.
	c.call("POST", "/v1/sandboxes/sleepy/exec", `{"command": ": > seen.log"}`, 200, nil)
	stop("sleepy")
	req, _ := http.NewRequest("POST", base+"/big", bytes.NewReader(make([]byte, 2<<20)))
	req.Header.Set("X-Froog-Url-Token", token)
	res, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "sandbox_starting") {
		t.Fatalf("a 2 MiB body while starting: %d %q %s", res.StatusCode, res.Header.Get("Retry-After"), b)
	}
	wait.For(t, 15*time.Second, "sleepy runs again", func() bool { return state("sleepy") == "running" })
	var seen struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/sleepy/exec", `{"command": "cat seen.log"}`, 200, &seen)
	if strings.Contains(seen.Stdout, "/big") {
		t.Fatalf("the app got the body it could not hold: %q", seen.Stdout)
	}

	// exec on a stopped sandbox with auto_start starts it and answers the
	// command's output; the event is the key's.
	stop("sleepy")
	var out struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/sleepy/exec", `{"command": "echo awake"}`, 200, &out)
	if out.Stdout != "awake\n" || autoStarts("key_") != 1 {
		t.Fatalf("exec on a stopped sandbox: %q, %d events by the key", out.Stdout, autoStarts("key_"))
	}

	// Without auto_start: the notice, and no start.
	c.call("PATCH", "/v1/sandboxes/sleepy", `{"auto_start": false}`, 200, nil)
	stop("sleepy")
	res, body = visit(t, web, "GET", base+"/", "X-Froog-Url-Token", token)
	if res.StatusCode != 503 || !strings.Contains(body, "sandbox_stopped") || state("sleepy") != "stopped" {
		t.Fatalf("without auto_start: %d %s", res.StatusCode, body)
	}
}

// Two `froogd edge` on one Postgres, 50 requests at once split between
// them, to a stopped sandbox with auto_start: one start, one event, and
// every request gets the app's answer.
func TestAutoStartAcrossEdges(t *testing.T) {
	// Alone: the edge holds a request 20 s of real time (wake.URLTimeout) while its sandbox starts; beside the other tests a start outlasted that.
	db, key, ctlKey, secret := selfHosted(t)
	caDir := t.TempDir()
	start(t, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey)
	_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
	var edges []*http.Client
	for i := 0; i < 2; i++ {
		_, e := start(t, regexp.MustCompile(`froog edge on https://(\S+) `), "edge", "--database-url", db, "--edge-addr", "127.0.0.1:0",
			"--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test", "--ca-dir", caDir, "--control-key-file", ctlKey, "--rate-limit", "0")
		edges = append(edges, edgeClient(t, e[1], filepath.Join(caDir, "ca.pem"), i == 1))
	}
	c := client{t: t, base: m[1], key: key}
	_, host := hostEcho(t, c)
	c.call("PATCH", "/v1/sandboxes/e2e", `{"auto_start": true}`, 200, nil)
	var tok struct{ Token string }
	c.call("POST", "/v1/sandboxes/e2e/urls/"+echoPort(t, c)+"/tokens", `{"ttl_secs": 600}`, 201, &tok)
	for i, web := range edges {
		wait.For(t, 15*time.Second, fmt.Sprintf("edge %d serves the URL", i), func() bool {
			res, err := web.Get("https://" + host + "/?_token=" + tok.Token)
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 302
		})
	}
	c.call("POST", "/v1/sandboxes/e2e/stop", "", 202, nil)
	wait.For(t, 30*time.Second, "e2e stops", func() bool {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/e2e", "", 200, &sb)
		return sb.State == "stopped"
	})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "https://"+host+fmt.Sprintf("/n%d", i), nil)
			req.Header.Set("X-Froog-Url-Token", tok.Token)
			res, err := edges[i%2].Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !bytes.Contains(b, []byte(fmt.Sprintf(`"path": "/n%d"`, i))) {
				t.Errorf("request %d: %d %s", i, res.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	var evs struct {
		Events []struct{ Action, Actor string }
	}
	c.call("GET", "/v1/audit", "", 200, &evs)
	n := 0
	for _, e := range evs.Events {
		if e.Action == "sandbox.auto_start" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d sandbox.auto_start events for 50 requests on two edges, want 1", n)
	}
}
