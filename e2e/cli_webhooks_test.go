package e2e_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"froog.tech/froog/internal/loopback"
)

// whsecRE matches a webhook signing secret.
var whsecRE = regexp.MustCompile(`whsec_[A-Za-z0-9_-]+`)

// froog webhooks, through froogd dev: add prints the signing secret once
// (the one a ping is then signed with), list shows the endpoint without
// it, update pauses it and narrows its events, test and deliveries say
// how pings went, rotate prints a new secret that signs from then on, rm
// removes it. No secret is ever on stderr, in list or deliveries, or in
// froogd's log. (Events reaching a receiver, and their retries, are
// TestWebhooksThroughFroogd's.)
func TestCLIWebhooks(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t)
	d := startDev(t, devOptions{env: []string{rc.env()}})
	froog := newCLI(t)
	froog.login(t, d)
	var secrets []string
	// noSecret fails when out holds a signing secret: one printed so far,
	// or any whsec_ at all.
	noSecret := func(what, out string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatalf("%s shows a signing secret: %s", what, out)
			}
		}
		if whsecRE.MatchString(out) {
			t.Fatalf("%s shows something like a signing secret: %s", what, out)
		}
	}
	// run is froog.run whose stderr must hold no secret.
	run := func(args ...string) (string, string, int) {
		t.Helper()
		out, errOut, code := froog.run(t, "", args...)
		noSecret("stderr of froog "+strings.Join(args, " "), errOut)
		return out, errOut, code
	}

	if out := froog.ok(t, "webhooks", "list"); out != "ID  NAME  URL  EVENTS  STATE  CREATED" {
		t.Fatalf("webhooks list with none: %q", out)
	}
	// The API's refusal, as the other commands show it.
	if _, errOut, code := run("webhooks", "add", "http://example.com/froog"); code != 1 || !regexp.MustCompile(`^froog: 400 invalid_value: url must be an https:// URL.*\(request \S+\)\n$`).MatchString(errOut) {
		t.Fatalf("add of an http:// URL: exit %d: %q", code, errOut)
	}
	if _, errOut, code := run("webhooks", "add", rc.srv.URL+"/froog", "--event", "sandbox.runnning"); code != 1 || !strings.Contains(errOut, `"sandbox.runnning"`) {
		t.Fatalf("add with an unknown event: exit %d: %q", code, errOut)
	}

	url := rc.srv.URL + "/froog"
	out, errOut, code := run("webhooks", "add", url, "--name", "e2e")
	m := regexp.MustCompile(`^(wh_\S+) added: (\S+), all events\nsigning secret: (whsec_\S+)\nIt is shown only now`).FindStringSubmatch(out)
	if code != 0 || m == nil || m[2] != url {
		t.Fatalf("add: exit %d: %q %s", code, out, errOut)
	}
	id, first := m[1], m[3]
	secrets = append(secrets, first)

	// The secret printed is the one the ping is signed with.
	rc.tell(id, first)
	if out := froog.ok(t, "webhooks", "test", id); !regexp.MustCompile(`^ping delivered 200 in \d+ ms$`).MatchString(out) {
		t.Fatalf("test: %q", out)
	}
	if got := rc.requests(); len(got) != 1 || got[0].Event != "ping" || got[0].Webhook != id || !got[0].Verified {
		t.Fatalf("the receiver got %+v, want one ping signed with the secret add printed", got)
	}

	list := froog.ok(t, "webhooks", "list")
	noSecret("webhooks list", list)
	if !regexp.MustCompile(`\n` + regexp.QuoteMeta(id) + `\s+e2e\s+` + regexp.QuoteMeta(url) + `\s+all\s+enabled\s+\d{4}-`).MatchString(list) {
		t.Fatalf("webhooks list: %s", list)
	}
	raw := froog.ok(t, "webhooks", "list", "--json")
	noSecret("webhooks list --json", raw)
	var listed struct {
		Webhooks []map[string]any `json:"webhooks"`
	}
	if err := json.Unmarshal([]byte(raw), &listed); err != nil || len(listed.Webhooks) != 1 || listed.Webhooks[0]["id"] != id || listed.Webhooks[0]["secret"] != nil {
		t.Fatalf("webhooks list --json: %v %s", err, raw)
	}

	// update: only what is given; both --enable and --disable refused.
	if out := froog.ok(t, "webhooks", "update", id, "--disable", "--event", "sandbox.stopped"); out != id+" updated: "+url+", sandbox.stopped events, paused" {
		t.Fatalf("update --disable: %q", out)
	}
	if _, errOut, code := run("webhooks", "update", id, "--enable", "--disable"); code != 1 || !strings.Contains(errOut, "not both") {
		t.Fatalf("update --enable --disable: exit %d: %q", code, errOut)
	}
	if list := froog.ok(t, "webhooks", "list"); !regexp.MustCompile(`\s+e2e\s+\S+\s+sandbox\.stopped\s+paused\s`).MatchString(list) {
		t.Fatalf("webhooks list after update: %s", list)
	}
	if _, errOut, code := run("webhooks", "update", "wh_none", "--enable"); code != 1 || !strings.Contains(errOut, "404 not_found") {
		t.Fatalf("update of no endpoint: exit %d: %q", code, errOut)
	}

	// A ping to where nothing listens: said, logged, exit 1.
	nowhere := fmt.Sprintf("https://127.0.0.1:%d/froog", loopback.FreePort(t))
	froog.ok(t, "webhooks", "update", id, "--url", nowhere)
	out, errOut, code = run("webhooks", "test", id)
	if code != 1 || !strings.HasPrefix(out, "ping failed: ") || !strings.Contains(out, "refused") {
		t.Fatalf("test of an endpoint nothing answers: exit %d: %q %q", code, out, errOut)
	}
	froog.ok(t, "webhooks", "update", id, "--url", url)

	// rotate: a new secret, and the next ping is signed with it.
	out, errOut, code = run("webhooks", "rotate", id)
	m = regexp.MustCompile(`^` + regexp.QuoteMeta(id) + ` has a new signing secret: (whsec_\S+)\nIt is shown only now`).FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] == first {
		t.Fatalf("rotate: exit %d: %q %s", code, out, errOut)
	}
	secrets = append(secrets, m[1])
	rc.tell(id, m[1])
	froog.ok(t, "webhooks", "test", id)
	if got := rc.requests(); len(got) != 2 || !got[1].Verified {
		t.Fatalf("the ping after rotate: %+v, want it signed with the new secret", got)
	}

	// deliveries: the three pings, newest first, and nothing secret.
	dl := froog.ok(t, "webhooks", "deliveries", id)
	noSecret("webhooks deliveries", dl)
	lines := strings.Split(dl, "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^TIME\s+EVENT\s+SANDBOX\s+ATTEMPT\s+RESULT\s+NEXT\s+EVENT ID$`).MatchString(lines[0]) {
		t.Fatalf("webhooks deliveries: %s", dl)
	}
	for i, want := range []string{`ping\s+-\s+1\s+delivered 200\s+-\s+evt_`, `ping\s+-\s+1\s+failed: .*refused`, `ping\s+-\s+1\s+delivered 200\s+-\s+evt_`} {
		if !regexp.MustCompile(`^\d{4}-\S+\s+` + want).MatchString(lines[i+1]) {
			t.Fatalf("webhooks deliveries line %d: %q, want %s", i+1, lines[i+1], want)
		}
	}
	raw = froog.ok(t, "webhooks", "deliveries", id, "--json", "--limit", "2")
	noSecret("webhooks deliveries --json", raw)
	var log struct {
		Deliveries []struct {
			Event, Status string
			Attempt       int
		}
	}
	if err := json.Unmarshal([]byte(raw), &log); err != nil || len(log.Deliveries) != 2 || log.Deliveries[0].Status != "delivered" || log.Deliveries[1].Status != "failed" {
		t.Fatalf("webhooks deliveries --json --limit 2: %v %s", err, raw)
	}

	if out := froog.ok(t, "webhooks", "rm", id); out != id+" removed" {
		t.Fatalf("rm: %q", out)
	}
	if out := froog.ok(t, "webhooks", "list", "--json"); out != "{\n  \"webhooks\": []\n}" {
		t.Fatalf("webhooks list after rm: %q", out)
	}
	if _, errOut, code := run("webhooks", "rm", id); code != 1 || !strings.Contains(errOut, "404 not_found") {
		t.Fatalf("rm of a removed endpoint: exit %d: %q", code, errOut)
	}
	noSecret("froogd's log", d.p.stderr.String())
}
