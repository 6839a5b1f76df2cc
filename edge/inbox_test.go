package edge_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/edge"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// fakeOpen stands in for the API's sealer: the tests' "sealed" secret is
// the secret itself.
func fakeOpen(sealed []byte, urlID string) (string, error) { return string(sealed), nil }

// inboxApp is the app behind an inbox: it records what it got, and
// answers 500 to the first `fail` requests.
type inboxApp struct {
	mu   sync.Mutex
	got  []seenDelivery
	fail int
}

type seenDelivery struct {
	ID, Attempt, URI, Sig string
	Body                  []byte
}

func (a *inboxApp) start(t *testing.T) int {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Froog-Delivery") == "" {
			return // the rig's probe that the URL is served
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.got = append(a.got, seenDelivery{ID: r.Header.Get("Froog-Delivery"), Attempt: r.Header.Get("Froog-Attempt"), URI: r.RequestURI, Sig: r.Header.Get("X-Hub-Signature-256"), Body: b})
		if a.fail > 0 {
			a.fail--
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

func (a *inboxApp) seen() []seenDelivery {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]seenDelivery(nil), a.got...)
}

func githubSig(secret string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return "sha256=" + hex.EncodeToString(h.Sum(nil))
}

// inboxURL gives the rig's URL for port an inbox on POST /webhooks/,
// verified with secret when it is not empty.
func (r *rig) inboxURL(label string, port int, token, secret string) store.URL {
	r.t.Helper()
	r.host(label, port, token == "", token)
	u, err := r.st.PutURL(ctx, r.sb.ID, port, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.Inbox = &store.Inbox{Method: "POST", PathPrefix: "/webhooks/"}
		if secret != "" {
			u.Inbox.Verify = &store.InboxVerify{Provider: edge.ProviderGitHub, SecretSealed: []byte(secret)}
		}
		return u, nil
	}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return u
}

func post(t *testing.T, c *http.Client, url string, body []byte, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// accept posts body to url until the inbox answers 202 (the route table
// follows the store a moment behind) and returns its Froog-Delivery.
func accept(t *testing.T, c *http.Client, url string, body []byte) string {
	t.Helper()
	var id string
	wait.For(t, 5*time.Second, "the inbox answers", func() bool {
		res, _ := post(t, c, url, body)
		id = res.Header.Get("Froog-Delivery")
		return res.StatusCode == 202
	})
	return id
}

// A private URL's verified inbox takes a signed request without the
// URL's token, answers 202 once it is stored, and delivers it whole, in
// arrival order, with Froog-Delivery; a bad signature gets 401 and
// nothing is stored; too large gets 413; the rest of the URL still asks
// for the token.
func TestInboxAcceptsAndDelivers(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	app := &inboxApp{}
	const secret = "It's a Secret to Everybody"
	u := r.inboxURL("hook-1-aaaaaa", app.start(t), "pt_owner", secret)
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Inbox, o.OpenSecret = r.st, fakeOpen })
	base := "https://hook-1-aaaaaa." + domain
	var ids []string
	for i, h2 := range []bool{false, true, false, true} {
		c := r.client(addr, h2)
		body := []byte(fmt.Sprintf(`{"n":%d,"zen":"Keep it logically awesome."}`, i))
		var res *http.Response
		var got []byte
		// The route table follows the store a moment behind.
		wait.For(t, 5*time.Second, "the inbox answers", func() bool {
			res, got = post(t, c, base+"/webhooks/gh?x=1", body, "X-Hub-Signature-256", githubSig(secret, body), "Content-Type", "application/json")
			return res.StatusCode == 202
		})
		id := res.Header.Get("Froog-Delivery")
		if !strings.HasPrefix(id, "dlv_") || !strings.Contains(string(got), id) {
			t.Fatalf("202 names no delivery: %q, %s", id, got)
		}
		ids = append(ids, id)
	}
	wait.For(t, 10*time.Second, "four deliveries", func() bool { return len(app.seen()) == 4 })
	for i, d := range app.seen() {
		want := fmt.Sprintf(`{"n":%d,"zen":"Keep it logically awesome."}`, i)
		if d.ID != ids[i] || d.Attempt != "1" || string(d.Body) != want || d.URI != "/webhooks/gh?x=1" || d.Sig != githubSig(secret, []byte(want)) {
			t.Errorf("delivery %d: got %+v, want id %s, attempt 1, body %s", i, d, ids[i], want)
		}
	}
	c := r.client(addr, false)
	body := []byte(`{"forged":true}`)
	res, _ := post(t, c, base+"/webhooks/gh", body, "X-Hub-Signature-256", githubSig("not the secret", body))
	if res.StatusCode != 401 {
		t.Errorf("forged signature: got %d, want 401", res.StatusCode)
	}
	res, _ = post(t, c, base+"/webhooks/gh", body)
	if res.StatusCode != 401 {
		t.Errorf("no signature: got %d, want 401", res.StatusCode)
	}
	big := bytes.Repeat([]byte("x"), store.MaxDeliveryBody+1)
	res, _ = post(t, c, base+"/webhooks/gh", big, "X-Hub-Signature-256", githubSig(secret, big))
	if res.StatusCode != 413 {
		t.Errorf("too large: got %d, want 413", res.StatusCode)
	}
	if list, _ := r.st.Deliveries(ctx, u.ID, 0); len(list) != 4 {
		t.Errorf("stored %d deliveries, want the 4 accepted", len(list))
	}
	// Outside the inbox's rule the URL is private as ever.
	if res, _ := do(t, c, "GET", base+"/webhooks/gh"); res.StatusCode != 401 {
		t.Errorf("GET outside the inbox without the token: got %d, want 401", res.StatusCode)
	}
	if res, _ := post(t, c, base+"/other", body, "X-Hub-Signature-256", githubSig(secret, body)); res.StatusCode != 401 {
		t.Errorf("POST outside the inbox's path: got %d, want 401", res.StatusCode)
	}
	// The secret is in no log line.
	if strings.Contains(r.logs.String(), secret) {
		t.Error("a log line holds the inbox's secret")
	}
}

// An app that answers 500 gets the request again, after the backoff,
// with the same Froog-Delivery and the next Froog-Attempt.
func TestInboxRetries(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	app := &inboxApp{fail: 1}
	r.inboxURL("hook-2-bbbbbb", app.start(t), "", "")
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Inbox = r.st })
	c := r.client(addr, false)
	id := accept(t, c, "https://hook-2-bbbbbb."+domain+"/webhooks/x", []byte("ping"))
	wait.For(t, 10*time.Second, "a second attempt", func() bool { return len(app.seen()) == 2 })
	got := app.seen()
	if got[0].ID != id || got[1].ID != id || got[0].Attempt != "1" || got[1].Attempt != "2" || string(got[1].Body) != "ping" {
		t.Fatalf("attempts: got %+v, want %s at 1 then 2", got, id)
	}
}

// A redelivery (the owner's, through the store, as the API asks it)
// reaches the app again with the same Froog-Delivery: the store's
// InboxChanged wakes the edge.
func TestInboxRedelivery(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	app := &inboxApp{}
	u := r.inboxURL("hook-6-ffffff", app.start(t), "", "")
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Inbox = r.st })
	c := r.client(addr, false)
	id := accept(t, c, "https://hook-6-ffffff."+domain+"/webhooks/x", []byte("ping"))
	wait.For(t, 10*time.Second, "the delivery", func() bool {
		d, err := r.st.Delivery(ctx, u.ID, id)
		return err == nil && d.State == store.DeliveryDelivered
	})
	if _, err := r.st.Redeliver(ctx, u.ID, id, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the redelivery", func() bool { return len(app.seen()) == 2 })
	if got := app.seen(); got[1].ID != id || got[1].Attempt != "2" || string(got[1].Body) != "ping" {
		t.Fatalf("redelivery: got %+v, want %s at attempt 2", got[1], id)
	}
}

// failingFinishes is a fake store whose FinishDelivery fails its first
// n calls, as a Postgres restarting does.
type failingFinishes struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (f *failingFinishes) FinishDelivery(ctx context.Context, id, owner string, r store.DeliveryResult) (store.Delivery, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return store.Delivery{}, errors.New("the store is restarting")
	}
	return f.Store.FinishDelivery(ctx, id, owner, r)
}

// An attempt whose record fails at first (the store restarting) is
// recorded once the store is back, within its lease: the app gets it
// once, and the queue goes on, not after the lease runs out.
func TestInboxRecordsThroughAStoreRestart(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	app := &inboxApp{}
	u := r.inboxURL("hook-7-gggggg", app.start(t), "", "")
	flaky := &failingFinishes{Store: r.st, n: 3}
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Inbox = flaky })
	c := r.client(addr, false)
	var ids []string
	for i := range 2 {
		ids = append(ids, accept(t, c, "https://hook-7-gggggg."+domain+"/webhooks/x", []byte(fmt.Sprint(i))))
	}
	wait.For(t, 20*time.Second, "both delivered", func() bool {
		list, _ := r.st.Deliveries(ctx, u.ID, 0)
		return len(list) == 2 && list[0].State == store.DeliveryDelivered && list[1].State == store.DeliveryDelivered
	})
	got := app.seen()
	if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[1] || got[0].Attempt != "1" {
		t.Fatalf("the app got %+v, want %v once each", got, ids)
	}
}

// Two edges take webhooks for one URL, and a third delivery was claimed
// by an edge that died before delivering it: every accepted request
// reaches the app once, in the order they were accepted, the dead
// edge's with its id once its lease ran out.
func TestInboxAcrossEdges(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	app := &inboxApp{}
	u := r.inboxURL("hook-3-cccccc", app.start(t), "", "")
	// The dead edge: it stored one and claimed it, then was gone.
	dead, err := r.st.AddDelivery(ctx, store.Delivery{ID: store.NewID("dlv"), URLID: u.ID, AccountID: u.AccountID, SandboxID: u.SandboxID, Port: u.Port,
		Method: "POST", Target: "/webhooks/first", Headers: []store.Header{{Name: "Host", Value: "hook-3-cccccc." + domain}}, Body: []byte("first"), ReceivedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.ClaimDelivery(ctx, u.ID, "edge_dead", time.Now(), time.Second); err != nil {
		t.Fatal(err)
	}
	inbox := func(o *edge.Options) { o.Inbox = r.st }
	a, _, _ := r.startEdge(r.st, inbox)
	b, _, _ := r.startEdge(r.st, inbox)
	ids := []string{dead.ID}
	for i := range 10 {
		c := r.client([]string{a, b}[i%2], i%3 == 0)
		var res *http.Response
		wait.For(t, 5*time.Second, "the inbox answers", func() bool {
			res, _ = post(t, c, "https://hook-3-cccccc."+domain+"/webhooks/n", []byte(fmt.Sprint(i)))
			return res.StatusCode == 202
		})
		ids = append(ids, res.Header.Get("Froog-Delivery"))
	}
	wait.For(t, 20*time.Second, "eleven deliveries", func() bool { return len(app.seen()) >= 11 })
	got := app.seen()
	if len(got) != 11 {
		t.Fatalf("the app got %d requests, want 11", len(got))
	}
	for i, d := range got {
		if d.ID != ids[i] || d.Attempt != []string{"2", "1"}[min(i, 1)] {
			t.Errorf("delivery %d: got %s attempt %s, want %s (arrival order, once each)", i, d.ID, d.Attempt, ids[i])
		}
	}
	if string(got[0].Body) != "first" {
		t.Errorf("the dead edge's delivery: got %q", got[0].Body)
	}
}

// A flood: past the requests a URL keeps waiting, the edge answers 429
// with Retry-After and stores nothing; every 202 is stored.
func TestInboxFlood(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	u := r.inboxURL("hook-4-dddddd", echo(t), "", "")
	// Stopped, without auto-start: nothing leaves the queue.
	if _, err := r.st.UpdateSandbox(ctx, r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.State, s.DesiredState = store.StateStopped, store.StateStopped
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Inbox, o.RateLimit = r.st, -1 })
	c := r.client(addr, true)
	url := "https://hook-4-dddddd." + domain + "/webhooks/flood"
	wait.For(t, 5*time.Second, "the inbox answers", func() bool {
		res, _ := post(t, c, url, []byte("0"))
		return res.StatusCode == 202
	})
	var mu sync.Mutex
	codes := map[int]int{}
	var retry string
	var wg sync.WaitGroup
	const each = (store.MaxPendingPerURL + 40) / 8
	for range 8 {
		wg.Go(func() {
			for range each {
				res, _ := post(t, c, url, []byte("flood"))
				mu.Lock()
				codes[res.StatusCode]++
				if res.StatusCode == 429 {
					retry = res.Header.Get("Retry-After")
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	want429 := 8*each - (store.MaxPendingPerURL - 1)
	if codes[202] != store.MaxPendingPerURL-1 || codes[429] != want429 || retry == "" {
		t.Fatalf("answers %v, Retry-After %q; want %d 202s and %d 429s with Retry-After", codes, retry, store.MaxPendingPerURL-1, want429)
	}
	if list, _ := r.st.Deliveries(ctx, u.ID, 0); len(list) != store.MaxPendingPerURL {
		t.Fatalf("stored %d, want %d", len(list), store.MaxPendingPerURL)
	}
}

// The sandbox stops while the app holds a delivery: the attempt fails,
// and once the sandbox runs again the request arrives again with its id
// and the next attempt's number; then it is delivered.
func TestInboxSandboxStopsMidDelivery(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	release := make(chan struct{})
	var mu sync.Mutex
	var attempts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Froog-Delivery") == "" {
			return
		}
		mu.Lock()
		attempts = append(attempts, req.Header.Get("Froog-Delivery")+" "+req.Header.Get("Froog-Attempt"))
		first := len(attempts) == 1
		mu.Unlock()
		if first {
			<-release // the app is busy with it when the sandbox stops
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), attempts...) }
	u := r.inboxURL("hook-5-eeeeee", srv.Listener.Addr().(*net.TCPAddr).Port, "", "")
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Inbox = r.st })
	c := r.client(addr, false)
	id := accept(t, c, "https://hook-5-eeeeee."+domain+"/webhooks/x", []byte("ping"))
	wait.For(t, 10*time.Second, "the app holds the first attempt", func() bool { return len(seen()) == 1 })
	setState := func(state string) {
		if _, err := r.st.UpdateSandbox(ctx, r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
			s.State, s.DesiredState = state, state
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	setState(store.StateStopped)
	r.tun.Drop(r.sb.ID)
	wait.For(t, 10*time.Second, "the attempt fails", func() bool {
		list, _ := r.st.Deliveries(ctx, u.ID, 0)
		return len(list) == 1 && list[0].State == store.DeliveryPending && list[0].LastError != ""
	})
	setState(store.StateRunning)
	wait.For(t, 20*time.Second, "delivered after the sandbox runs again", func() bool {
		list, _ := r.st.Deliveries(ctx, u.ID, 0)
		return len(list) == 1 && list[0].State == store.DeliveryDelivered
	})
	got := seen()
	last := got[len(got)-1]
	if len(got) < 2 || got[0] != id+" 1" || !strings.HasPrefix(last, id+" ") || last == id+" 1" {
		t.Fatalf("attempts the app saw: %q; want %s at 1, then again with the same id at a later attempt", got, id)
	}
}
