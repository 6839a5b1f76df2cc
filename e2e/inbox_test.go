package e2e_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// hookRecorder is an app that writes down every request it gets, one JSON
// line each (path, headers, body in base64), and answers 204.
const hookRecorder = `import http.server, json, sys, base64
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with open("hooks.log", "a") as f:
            f.write(json.dumps({"path": self.path, "headers": dict(self.headers.items()), "body": base64.b64encode(body).decode()}) + "\n")
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// A stopped auto-start sandbox's private URL has a GitHub-verified inbox:
// a signed POST without froog's token is answered 202 by the edge while
// the sandbox is stopped, the sandbox starts, and the app gets the exact
// body and the signature with Froog-Delivery; a bad signature gets 401
// and nothing is stored; a redelivery arrives again with the same id.
func TestInboxWakesAStoppedSandbox(t *testing.T) {
	// Alone: it stops and starts a sandbox and waits on delivery in real time, as the auto-start tests do.
	d := startDev(t, devOptions{args: []string{"--rate-limit", "0"}})
	c, web := d.c, d.web(false)
	state := func() string {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/hooks", "", 200, &sb)
		return sb.State
	}
	c.call("POST", "/v1/sandboxes", `{"name": "hooks", "auto_start": true}`, 202, nil)
	wait.For(t, 15*time.Second, "hooks runs", func() bool { return state() == "running" })
	script, _ := json.Marshal(hookRecorder)
	c.call("POST", "/v1/sandboxes/hooks/exec", `{"command": "cat > rec.py", "stdin": `+string(script)+`}`, 200, nil)
	port := loopback.FreePort(t)
	c.call("POST", "/v1/sandboxes/hooks/jobs", fmt.Sprintf(`{"command": "python3 rec.py %d"}`, port), 201, nil)
	c.call("POST", "/v1/sandboxes/hooks/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, nil)
	const secret = "It's a Secret to Everybody"
	var u struct{ URL, Host string }
	c.call("POST", "/v1/sandboxes/hooks/urls", fmt.Sprintf(`{"port": %d, "inbox": {"match": "POST /webhooks/", "verify": {"provider": "github", "secret": %q}}}`, port, secret), 201, &u)
	base := "https://" + u.Host

	c.call("POST", "/v1/sandboxes/hooks/stop", "", 202, nil)
	wait.For(t, 15*time.Second, "hooks stops", func() bool { return state() == "stopped" })

	sign := func(body []byte) string {
		h := hmac.New(sha256.New, []byte(secret))
		h.Write(body)
		return "sha256=" + hex.EncodeToString(h.Sum(nil))
	}
	send := func(body []byte, sig string) (*http.Response, time.Duration) {
		req, _ := http.NewRequest("POST", base+"/webhooks/github?src=gh", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push") // Go sends it as X-Github-Event
		req.Header.Set("X-Hub-Signature-256", sig)
		start := time.Now()
		res, err := web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res, time.Since(start)
	}
	forged := []byte(`{"ref":"refs/heads/evil"}`)
	if res, _ := send(forged, sign([]byte("something else"))); res.StatusCode != 401 {
		t.Fatalf("a bad signature: got %d, want 401", res.StatusCode)
	}
	body := []byte("{\"ref\":\"refs/heads/main\",\"zen\":\"Design for failure.\"}\n")
	res, took := send(body, sign(body))
	id := res.Header.Get("Froog-Delivery")
	if res.StatusCode != 202 || !strings.HasPrefix(id, "dlv_") {
		t.Fatalf("a signed webhook to the stopped sandbox: %d, Froog-Delivery %q; want 202 and an id", res.StatusCode, id)
	}
	t.Logf("the 202 took %v (the sender's view, one TLS connection reused)", took)

	// The edge wakes the sandbox and delivers; the owner's view says so.
	delivered := func(attempts int) bool {
		list := deliveries(t, c, "hooks", port)
		return len(list) == 1 && list[0].ID == id && list[0].State == "delivered" && list[0].Attempts >= attempts
	}
	wait.For(t, 90*time.Second, "the webhook is delivered", func() bool { return delivered(1) })
	if s := state(); s != "running" {
		t.Fatalf("after delivery the sandbox is %s", s)
	}
	type seen struct {
		Path    string
		Headers map[string]string
		Body    string
	}
	got := func() []seen {
		var out struct{ Stdout string }
		c.call("POST", "/v1/sandboxes/hooks/exec", `{"command": "cat hooks.log"}`, 200, &out)
		var list []seen
		for line := range strings.Lines(out.Stdout) {
			var s seen
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("hooks.log: %v: %q", err, line)
			}
			list = append(list, s)
		}
		return list
	}
	check := func(s seen) {
		t.Helper()
		b, _ := base64.StdEncoding.DecodeString(s.Body)
		if !bytes.Equal(b, body) || s.Path != "/webhooks/github?src=gh" || s.Headers["X-Hub-Signature-256"] != sign(body) ||
			s.Headers["X-Github-Event"] != "push" || s.Headers["Froog-Delivery"] != id || s.Headers["X-Froog-Url-Token"] != "" {
			t.Fatalf("the app got %+v (body %q); want the sender's bytes and headers with Froog-Delivery %s", s, b, id)
		}
	}
	list := got()
	if len(list) != 1 {
		t.Fatalf("the app got %d requests, want 1 (the forged one never)", len(list))
	}
	check(list[0])

	// A redelivery arrives again, with the same id.
	c.call("POST", fmt.Sprintf("/v1/sandboxes/hooks/urls/%d/deliveries/%s/redeliver", port, id), "", 200, nil)
	wait.For(t, 30*time.Second, "the redelivery arrives", func() bool { return len(got()) == 2 })
	check(got()[1])
	wait.For(t, 10*time.Second, "the redelivery is recorded", func() bool { return delivered(2) })
}
