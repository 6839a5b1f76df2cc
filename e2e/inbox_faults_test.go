package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// The webhook inbox's faults (issue 29), each under the real binaries on
// Postgres (the flood under froogd dev, on the embedded store), counting
// what the app got at the end.

// hookCounter is an app that writes down each delivery it gets as a line
// "Froog-Delivery Froog-Attempt" and answers 204. Run as hold.py, it
// writes the first one down and never answers it. Run as gate.py, it
// neither writes down nor answers any until a file named open is there.
const hookCounter = `import http.server, os, sys, threading, time
lock = threading.Lock()
held = ["hold" not in sys.argv[0]]
gated = "gate" in sys.argv[0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        while gated and not os.path.exists("open"):
            time.sleep(0.05)
        with lock:
            with open("deliveries.log", "a") as f:
                f.write("%s %s\n" % (self.headers.get("Froog-Delivery"), self.headers.get("Froog-Attempt")))
            hold = not held[0]
            held[0] = True
        if hold:
            threading.Event().wait()
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// arrival is one delivery as the app got it.
type arrival struct{ id, attempt string }

// arrivals reads what hookCounter wrote down in sandbox sb.
func arrivals(t *testing.T, c client, sb string) []arrival {
	t.Helper()
	var out struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/"+sb+"/exec", `{"command": "cat deliveries.log 2>/dev/null || true"}`, 200, &out)
	var list []arrival
	for line := range strings.Lines(out.Stdout) {
		id, attempt, _ := strings.Cut(strings.TrimSpace(line), " ")
		list = append(list, arrival{id, attempt})
	}
	return list
}

// inboxOn gives port of sandbox sb a public URL with an inbox on POST
// /webhooks/ and returns its host.
func inboxOn(t *testing.T, c client, sb string, port int) string {
	t.Helper()
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/"+sb+"/urls", fmt.Sprintf(`{"port": %d, "public": true, "inbox": {"match": "POST /webhooks/"}}`, port), 201, &u)
	return u.Host
}

// sendHook posts one webhook to host through web: the status (0 when no
// answer came) and the Froog-Delivery of a 202.
func sendHook(web *http.Client, host, body string) (int, string) {
	res, err := web.Post("https://"+host+"/webhooks/n", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, ""
	}
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		return res.StatusCode, ""
	}
	return res.StatusCode, res.Header.Get("Froog-Delivery")
}

// acceptHook posts webhook body to host through web until the edge
// answers 202 (the URL may not be in its route table yet) and returns the
// answer's Froog-Delivery.
func acceptHook(t *testing.T, web *http.Client, host, body string) string {
	t.Helper()
	var id string
	wait.For(t, 10*time.Second, "the inbox answers", func() bool {
		code, got := sendHook(web, host, body)
		id = got
		return code == http.StatusAccepted
	})
	return id
}

// delivery is one of an inbox's deliveries as its owner sees it.
type delivery struct {
	ID, State string
	Attempts  int
}

// deliveries lists the deliveries of the URL of port in sandbox sb in the
// store's order, oldest first (the API lists the newest 100 first). It
// starts nothing: exec, which arrivals uses, starts a stopped sandbox with
// auto_start.
func deliveries(t *testing.T, c client, sb string, port int) []delivery {
	t.Helper()
	var list []delivery
	c.call("GET", fmt.Sprintf("/v1/sandboxes/%s/urls/%d/deliveries", sb, port), "", 200, &list)
	slices.Reverse(list)
	return list
}

// allDelivered reports whether the URL of port in sandbox sb has n
// deliveries, every one delivered.
func allDelivered(t *testing.T, c client, sb string, port, n int) bool {
	list := deliveries(t, c, sb, port)
	for _, d := range list {
		if d.State != "delivered" {
			return false
		}
	}
	return len(list) == n
}

// inOrder checks got, what the app was delivered, against ids, the
// webhooks accepted in the order the store took them: each came once, in
// that order, at attempt 1; but each one in cut (its attempt cut mid-way)
// came twice in a row, the second time with the same Froog-Delivery at a
// later attempt (a try that failed before it reached the app counts too).
func inOrder(got []arrival, ids []string, cut map[string]bool) error {
	i := 0
	for _, id := range ids {
		times := 1
		if cut[id] {
			times = 2
		}
		attempt := 0
		for k := range times {
			if i == len(got) {
				return fmt.Errorf("%d deliveries: %s missing", len(got), id)
			}
			n, err := strconv.Atoi(got[i].attempt)
			switch {
			case got[i].id != id || err != nil:
				return fmt.Errorf("delivery %d is %s (attempt %s), want %s", i, got[i].id, got[i].attempt, id)
			case k == 0 && n != 1, k > 0 && n <= attempt:
				return fmt.Errorf("delivery %d is %s at attempt %d after attempt %d", i, id, n, attempt)
			}
			attempt = n
			i++
		}
	}
	if i < len(got) {
		return fmt.Errorf("%d deliveries, want %d: then %v", len(got), i, got[i:])
	}
	return nil
}

// inboxEdge starts a froogd edge of cl whose clock reads clock (a test
// clock file), and returns it and its address.
func inboxEdge(t *testing.T, cl *cluster, clock string) (*proc, string) {
	t.Helper()
	args := []string{"edge", "--database-url", cl.db, "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0",
		"--domain", "froog.test", "--ca-dir", filepath.Dir(cl.caFile), "--control-key-file", cl.ctlKey}
	cmd := exec.Command(froogd, args...)
	cmd.Env = append(os.Environ(), "FROOG_TEST_CLOCK_FILE="+clock)
	p, m := startCmd(t, edgeReady, cmd, args)
	return p, m[1]
}

// The edge is killed while the app holds a delivery (between "stored"
// and "delivered"), with four more stored behind it, and started again:
// the restarted edge, once the dead one's lease has run out, delivers the
// held one again with the same Froog-Delivery (attempt 2, or later: a
// try of the new edge that fails before it reaches the app counts too,
// and one run saw attempt 3), then the four,
// in arrival order. Nothing lost; the one duplicate is the held one.
func TestInboxEdgeKilledMidDelivery(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	cl := startCluster(t, db, key, ctlKey, secret, 0)
	c := cl.c
	clock := clockFile(t)
	e1, addr := inboxEdge(t, cl, clock)
	newSandbox(t, c, "ik", 30*time.Second)
	host := inboxOn(t, c, "ik", serveApp(t, c, "ik", "hold.py", hookCounter))
	web := edgeClient(t, addr, cl.caFile, false)
	var ids []string
	for i := range 5 {
		ids = append(ids, acceptHook(t, web, host, fmt.Sprint(i)))
	}
	wait.For(t, 30*time.Second, "the app holds the first delivery", func() bool { return len(arrivals(t, c, "ik")) == 1 })
	e1.kill()
	// The dead edge's lease (2 minutes) runs out on the clock of the
	// edge that takes over.
	if err := os.WriteFile(clock, []byte("3m"), 0o600); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	inboxEdge(t, cl, clock)
	var got []arrival
	wait.For(t, 60*time.Second, "every webhook delivered", func() bool { got = arrivals(t, c, "ik"); return len(got) >= len(ids)+1 })
	if err := inOrder(got, ids, map[string]bool{ids[0]: true}); err != nil {
		t.Fatalf("the app got %v: %v", got, err)
	}
	t.Logf("%d webhooks accepted, %d deliveries (the held one twice, same id, again at attempt %s); all delivered %v after the restart began",
		len(ids), len(got), got[1].attempt, time.Since(restarted).Round(time.Millisecond))
}

// Postgres restarts while a sender posts webhooks one after another to
// an edge, and while the edge delivers them: while it is away the edge
// refuses them (503), storing nothing it refused; every one it answered
// 202 (before, during the fall, after) reaches the app, the same id on a
// repeat.
func TestInboxPostgresRestart(t *testing.T) {
	t.Parallel()
	pg := privatePostgres(t)
	db, key, ctlKey, secret := selfHostedOn(t, pg.url())
	cl := startCluster(t, db, key, ctlKey, secret, 1)
	c := cl.c
	newSandbox(t, c, "ip", 30*time.Second)
	host := inboxOn(t, c, "ip", serveApp(t, c, "ip", "hooks.py", hookCounter))
	web := edgeClient(t, cl.edgeAddrs[0], cl.caFile, false)
	accepted := map[string]bool{}
	wait.For(t, 10*time.Second, "the inbox answers", func() bool {
		code, id := sendHook(web, host, "first")
		accepted[id] = code == http.StatusAccepted
		return code == http.StatusAccepted
	})
	delete(accepted, "")

	var mu sync.Mutex
	codes := map[int]int{}
	var refusedDown int // answers other than 202 while Postgres is stopped
	down := false
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			code, id := sendHook(web, host, fmt.Sprint(n))
			mu.Lock()
			codes[code]++
			if id != "" {
				accepted[id] = true
			} else if down {
				refusedDown++
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	count := func(f func() bool) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return f() }
	}
	wait.For(t, 30*time.Second, "webhooks accepted before the restart", count(func() bool { return len(accepted) >= 30 }))
	mu.Lock()
	down = true
	mu.Unlock()
	pg.stop()
	wait.For(t, 30*time.Second, "webhooks refused while Postgres is away", count(func() bool { return refusedDown >= 20 }))
	pg.start()
	mu.Lock()
	down = false
	before := len(accepted)
	mu.Unlock()
	wait.For(t, 60*time.Second, "webhooks accepted after the restart", count(func() bool { return len(accepted) >= before+30 }))
	close(stop)
	<-sent

	var got []arrival
	wait.For(t, 90*time.Second, "every accepted webhook delivered", func() bool {
		got = arrivals(t, c, "ip")
		seen := map[string]bool{}
		for _, a := range got {
			seen[a.id] = true
		}
		for id := range accepted {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	times := map[string]int{}
	for _, a := range got {
		times[a.id]++
	}
	repeats, unanswered := 0, 0
	for id, n := range times {
		repeats += n - 1
		if !accepted[id] {
			unanswered++
		}
	}
	t.Logf("sent %d: %v by status; %d accepted, all delivered; %d deliveries, %d repeats (same Froog-Delivery)",
		sumCodes(codes), codes, len(accepted), len(got), repeats)
	if unanswered > 0 {
		t.Fatalf("%d deliveries of webhooks the edge did not answer 202", unanswered)
	}
}

func sumCodes(codes map[int]int) int {
	n := 0
	for _, v := range codes {
		n += v
	}
	return n
}

// The sandbox is stopped through the API while its app holds a delivery,
// with four more stored behind it, and three more arrive as it stops.
// The stop cuts the held delivery (the local driver pauses the sandbox:
// its SSH server goes, its processes freeze, for --warm-secs). The edge's
// retry finds the sandbox stopped and, as it has auto_start, starts it
// (docs/guide/urls.md: one sandbox.auto_start by public-url, "webhook
// inbox", naming the held delivery); the app resumes, and gets the held
// one again with the same Froog-Delivery at a later attempt, then the
// seven in arrival order, each once.
func TestInboxSandboxStopsMidDelivery(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	cl := startCluster(t, db, key, ctlKey, secret, 1)
	c := cl.c
	c.call("POST", "/v1/sandboxes", `{"name": "is", "auto_start": true}`, 202, nil)
	runsWithin(t, c, "is", 30*time.Second)
	port := serveApp(t, c, "is", "hold.py", hookCounter)
	host := inboxOn(t, c, "is", port)
	web := edgeClient(t, cl.edgeAddrs[0], cl.caFile, false)
	var ids []string
	for i := range 5 {
		ids = append(ids, acceptHook(t, web, host, fmt.Sprint(i)))
	}
	wait.For(t, 30*time.Second, "the app holds the first delivery", func() bool { return len(arrivals(t, c, "is")) == 1 })
	c.call("POST", "/v1/sandboxes/is/stop", "", 202, nil)
	stopped := time.Now()
	for i := range 3 {
		ids = append(ids, acceptHook(t, web, host, fmt.Sprint("stopping ", i)))
	}
	// The owner's view until all are delivered, not arrivals: its exec
	// would start the sandbox in the edge's place.
	wait.For(t, 90*time.Second, "every webhook delivered", func() bool { return allDelivered(t, c, "is", port, len(ids)) })
	took := time.Since(stopped)
	got := arrivals(t, c, "is")
	if err := inOrder(got, ids, map[string]bool{ids[0]: true}); err != nil {
		t.Fatalf("the app got %v: %v", got, err)
	}

	// Who started it again: the edge, for the cut delivery, after the stop.
	var audit struct {
		Events []struct {
			Action, Actor string
			ActorLabel    string `json:"actor_label"`
			Detail        map[string]string
		}
	}
	c.call("GET", "/v1/audit?limit=100", "", 200, &audit)
	var seen []string // oldest first
	for _, e := range slices.Backward(audit.Events) {
		switch e.Action {
		case "sandbox.stop":
			seen = append(seen, e.Action)
		case "sandbox.auto_start":
			seen = append(seen, fmt.Sprintf("%s by %s (%s) for %s", e.Action, e.Actor, e.ActorLabel, e.Detail["delivery"]))
		}
	}
	if want := []string{"sandbox.stop", "sandbox.auto_start by public-url (webhook inbox) for " + ids[0]}; !slices.Equal(seen, want) {
		t.Fatalf("stops and auto-starts in the audit log: %q, want %q", seen, want)
	}
	t.Logf("%d webhooks accepted (5 before the stop, 3 as it stopped), %d deliveries (the held one twice, same id, again at attempt %s); the edge started the sandbox again; all delivered %v after the stop",
		len(ids), len(got), got[1].attempt, took.Round(time.Millisecond))
}

// Two edges on one Postgres take webhooks for one URL, and both deliver
// them. A delivery is leased per URL from the store, its queue's head
// alone (edge/inbox_deliver.go), and the store numbers a URL's requests
// one add at a time (the URL's row locked): so, across edges, the app
// gets them in the order the store took them, one at a time, whichever
// edge took or delivers each. A sender that waits for each 202 has its
// own order kept; two senders at once, on the two edges, are interleaved
// as the store took them. Here, without faults, each exactly once at
// attempt 1: thirty sent by one sender alternately to the two edges, in
// the order sent, then twenty-five by each of two senders at once, in
// the store's order (the owner's view) and each sender's order.
func TestInboxTwoEdges(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	cl := startCluster(t, db, key, ctlKey, secret, 2)
	c := cl.c
	newSandbox(t, c, "i2", 30*time.Second)
	port := serveApp(t, c, "i2", "hooks.py", hookCounter)
	host := inboxOn(t, c, "i2", port)
	webs := []*http.Client{edgeClient(t, cl.edgeAddrs[0], cl.caFile, false), edgeClient(t, cl.edgeAddrs[1], cl.caFile, false)}
	var alternate []string
	for i := range 30 {
		alternate = append(alternate, acceptHook(t, webs[i%2], host, fmt.Sprint("a", i)))
	}
	var wg sync.WaitGroup
	senders := make([][]string, 2)
	for e, web := range webs {
		wg.Go(func() {
			for i := range 25 {
				code, id := sendHook(web, host, fmt.Sprint(e, i))
				if code != http.StatusAccepted {
					t.Errorf("sender %d, webhook %d: %d, want 202", e, i, code)
					return
				}
				senders[e] = append(senders[e], id)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	total := len(alternate) + len(senders[0]) + len(senders[1])
	wait.For(t, 60*time.Second, "every webhook delivered", func() bool { return allDelivered(t, c, "i2", port, total) })

	var stored []string // the store's order
	for _, d := range deliveries(t, c, "i2", port) {
		if d.Attempts != 1 {
			t.Errorf("delivery %s took %d attempts, want 1", d.ID, d.Attempts)
		}
		stored = append(stored, d.ID)
	}
	if !slices.Equal(stored[:len(alternate)], alternate) {
		t.Fatalf("the store took the alternate sender's webhooks as %v, want %v (as sent)", stored[:len(alternate)], alternate)
	}
	next := []int{0, 0} // each sender's next
	for _, id := range stored[len(alternate):] {
		switch {
		case next[0] < len(senders[0]) && id == senders[0][next[0]]:
			next[0]++
		case next[1] < len(senders[1]) && id == senders[1][next[1]]:
			next[1]++
		default:
			t.Fatalf("the store took %s out of its sender's order (or from no sender): %v, senders %v", id, stored[len(alternate):], senders)
		}
	}
	got := arrivals(t, c, "i2")
	if err := inOrder(got, stored, nil); err != nil {
		t.Fatalf("the app got %v: %v", got, err)
	}
	// Both edges delivered: each logs every delivery it makes.
	var by []int
	wait.For(t, 10*time.Second, "each delivery in one edge's log", func() bool {
		by = []int{deliveredBy(cl.edges[0]), deliveredBy(cl.edges[1])}
		return by[0]+by[1] >= total
	})
	if by[0]+by[1] != total || by[0] == 0 || by[1] == 0 {
		t.Fatalf("the edges' logs count %v deliveries, want %d in all, some by each", by, total)
	}
	t.Logf("%d webhooks accepted (%d alternately, %d and %d at once), %d deliveries, each once, in the store's order; edges delivered %d and %d",
		total, len(alternate), len(senders[0]), len(senders[1]), len(got), by[0], by[1])
}

// deliveredBy counts the deliveries that edge p's log says it made and
// the app answered 2xx.
func deliveredBy(p *proc) int {
	n := 0
	for line := range strings.Lines(p.stderr.String()) {
		var l struct{ Msg, State string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "inbox delivery" && l.State == "delivered" {
			n++
		}
	}
	return n
}

// A flood to one URL whose app answers nothing yet (gate.py holds the
// first delivery), from eight senders at once over one HTTP/2
// connection: the edge takes exactly store.MaxPendingPerURL (202), the
// held one and those waiting behind it, and refuses every other one with
// 429 inbox_full, Retry-After: 30 and the API's error body, storing
// nothing. The owner's view lists taken ones alone, waiting; once the app
// answers, it gets every taken one and nothing else (the held one again,
// with its id at another attempt, should its attempt time out), and the
// owner's purge counts exactly the taken ones. The bound per account, ten
// URLs' worth, is the store's (storetest's InboxAccountBound).
func TestInboxFlood(t *testing.T) {
	t.Parallel()
	// No limit per client address: its 429 is not the inbox's.
	d := startDev(t, devOptions{args: []string{"--rate-limit", "0"}})
	c := d.c
	newSandbox(t, c, "iflood", 30*time.Second)
	port := serveApp(t, c, "iflood", "gate.py", hookCounter)
	host := inboxOn(t, c, "iflood", port)
	web := d.web(true)
	accepted := map[string]bool{acceptHook(t, web, host, "first"): true}

	const senders, each = 8, (store.MaxPendingPerURL + 40) / 8
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	began := time.Now()
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				res, err := web.Post("https://"+host+"/webhooks/n", "application/json", strings.NewReader(fmt.Sprint(s, " ", i)))
				if err != nil {
					t.Errorf("sender %d: %v", s, err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.ProtoMajor != 2 {
					t.Errorf("sender %d: %s, want HTTP/2", s, res.Proto)
					return
				}
				mu.Lock()
				codes[res.StatusCode]++
				if res.StatusCode == http.StatusAccepted {
					accepted[res.Header.Get("Froog-Delivery")] = true
				}
				mu.Unlock()
				var e struct {
					Error struct {
						Code, Message string
						RequestID     string `json:"request_id"`
					}
				}
				if res.StatusCode == http.StatusTooManyRequests && (res.Header.Get("Retry-After") != "30" || res.Header.Get("Content-Type") != "application/json" ||
					json.Unmarshal(b, &e) != nil || e.Error.Code != "inbox_full" || e.Error.Message == "" || e.Error.RequestID != res.Header.Get("X-Request-Id")) {
					t.Errorf("a 429 with Retry-After %q, X-Request-Id %q, %s: want Retry-After: 30 and the API's error inbox_full",
						res.Header.Get("Retry-After"), res.Header.Get("X-Request-Id"), b)
				}
			}
		})
	}
	wg.Wait()
	flood := time.Since(began)
	if t.Failed() {
		t.FailNow()
	}
	want429 := senders*each - (store.MaxPendingPerURL - 1)
	if codes[http.StatusAccepted] != store.MaxPendingPerURL-1 || codes[http.StatusTooManyRequests] != want429 || len(codes) != 2 ||
		len(accepted) != store.MaxPendingPerURL {
		t.Fatalf("answers %v, %d ids taken; want %d 202s, each its own id (the first's too), and %d 429s",
			codes, len(accepted), store.MaxPendingPerURL-1, want429)
	}
	// The owner's view, the newest 100: taken ones, waiting (its purge,
	// at the end, counts them all).
	for _, dl := range deliveries(t, c, "iflood", port) {
		if !accepted[dl.ID] || dl.State != "pending" {
			t.Fatalf("the owner's view lists %+v; want only taken ones, pending", dl)
		}
	}

	c.call("POST", "/v1/sandboxes/iflood/exec", `{"command": "touch open"}`, 200, nil)
	opened := time.Now()
	// Delivered in arrival order: the newest delivered, all are.
	wait.For(t, 120*time.Second, "every taken webhook delivered", func() bool {
		list := deliveries(t, c, "iflood", port)
		return list[len(list)-1].State == "delivered"
	})
	took := time.Since(opened)
	got := arrivals(t, c, "iflood")
	seen, ids := map[arrival]bool{}, map[string]bool{}
	for _, a := range got {
		if !accepted[a.id] || seen[a] {
			t.Fatalf("the app got %s at attempt %s: want taken ones alone, each attempt once", a.id, a.attempt)
		}
		seen[a], ids[a.id] = true, true
	}
	if len(ids) != len(accepted) {
		t.Fatalf("the app got %d of the %d taken", len(ids), len(accepted))
	}
	repeats := len(got) - len(ids)
	var purge struct{ Purged int }
	c.call("DELETE", fmt.Sprintf("/v1/sandboxes/iflood/urls/%d/deliveries", port), "", 200, &purge)
	if purge.Purged != len(accepted) {
		t.Fatalf("the owner's purge removed %d deliveries, want the %d taken", purge.Purged, len(accepted))
	}
	t.Logf("one webhook, then %d from %d senders at once over HTTP/2 in %v: %v by status; the app got the %d taken (%d repeats), all delivered %v after it answered",
		senders*each, senders, flood.Round(time.Millisecond), codes, len(accepted), repeats, took.Round(time.Millisecond))
}
