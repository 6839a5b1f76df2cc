package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// An app that answers 204 to a POST and writes down each one's
// Froog-Delivery, one a line.
const inboxApp = `import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with open("deliveries", "a") as f:
            f.write(self.headers.get("Froog-Delivery", "") + "\n")
        self.send_response(204)
        self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// froog inbox, through froogd dev: a URL's deliveries listed, one
// redelivered with its id (and refused while it is queued), --failed with
// none failed, a purge that asks first.
func TestCLIInbox(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	froog := newCLI(t)
	froog.login(t, d)
	froog.ok(t, "new", "hooks")
	port := loopback.FreePort(t)
	p := fmt.Sprint(port)
	if _, errOut, code := froog.run(t, inboxApp, "exec", "hooks", "--", "cat > app.py"); code != 0 {
		t.Fatalf("write the app: %s", errOut)
	}
	froog.ok(t, "exec", "hooks", "--detach", "--", "python3 app.py "+p)
	froog.ok(t, "wait", "hooks", "--port", p, "--timeout", "30s")
	// The inbox is turned on by the API's add-or-change call.
	host := inboxOn(t, d.c, "hooks", port)
	if host == "" {
		t.Fatal("turn the inbox on: no host")
	}

	web := d.web(false)
	var id string
	wait.For(t, 10*time.Second, "the inbox answers", func() bool {
		res, err := web.Post("https://"+host+"/webhooks/gh", "application/json", strings.NewReader(`{"zen":"Keep it logically awesome."}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		id = res.Header.Get("Froog-Delivery")
		return res.StatusCode == 202
	})
	seen := func() []string { return strings.Fields(froog.ok(t, "exec", "hooks", "--", "cat deliveries || true")) }
	wait.For(t, 30*time.Second, "the delivery", func() bool { return strings.Contains(froog.ok(t, "inbox", "list", "hooks", p), "delivered") })
	list := froog.ok(t, "inbox", "list", "hooks", p)
	for _, want := range []string{"ID", "STATE", "ATTEMPTS", "LAST", id, "delivered", "204", "POST /webhooks/gh"} {
		if !strings.Contains(list, want) {
			t.Fatalf("inbox list lacks %q: %s", want, list)
		}
	}
	var ds []struct {
		ID, State string
		Attempts  int
	}
	if err := json.Unmarshal([]byte(froog.ok(t, "inbox", "list", "hooks", p, "--json")), &ds); err != nil || len(ds) != 1 || ds[0].ID != id || ds[0].Attempts != 1 {
		t.Fatalf("inbox list --json: %v %+v", err, ds)
	}

	if out := froog.ok(t, "inbox", "redeliver", "hooks", p, id); out != id+" queued again" {
		t.Fatalf("redeliver printed %q", out)
	}
	wait.For(t, 30*time.Second, "the redelivery", func() bool { return len(seen()) == 2 })
	if got := seen(); got[0] != id || got[1] != id {
		t.Fatalf("the app got %v, want %s twice", got, id)
	}
	if _, errOut, code := froog.run(t, "", "inbox", "redeliver", "hooks", p, "dlv_none"); code != 1 || !strings.Contains(errOut, "404 not_found") {
		t.Fatalf("redeliver of an unknown id: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{{}, {id, "--failed"}} {
		if _, errOut, code := froog.run(t, "", append([]string{"inbox", "redeliver", "hooks", p}, args...)...); code != 1 || !strings.Contains(errOut, "--failed") {
			t.Fatalf("redeliver %v: exit %d: %s", args, code, errOut)
		}
	}
	if out := froog.ok(t, "inbox", "redeliver", "hooks", p, "--failed"); out != "no failed deliveries" {
		t.Fatalf("redeliver --failed with none failed: %q", out)
	}

	// Asked (stdin is /dev/null here, read as an empty answer), it keeps them.
	if _, errOut, code := froog.run(t, "", "inbox", "purge", "hooks", p); code != 1 || !strings.Contains(errOut, "[y/N]") || !strings.Contains(errOut, "not purged") {
		t.Fatalf("purge without -y: exit %d: %s", code, errOut)
	}
	if out := froog.ok(t, "inbox", "purge", "hooks", p, "-y"); out != "1 deliveries removed" {
		t.Fatalf("purge printed %q", out)
	}
	if out := froog.ok(t, "inbox", "list", "hooks", p, "--json"); out != "[]" {
		t.Fatalf("inbox list after a purge: %s", out)
	}
}
