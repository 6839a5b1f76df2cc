package api_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

type hookAnswer struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	URL     string   `json:"url"`
	Events  []string `json:"events"`
	Enabled bool     `json:"enabled"`
	Secret  string   `json:"secret"`
}

type attemptAnswer struct {
	EventID      string     `json:"event_id"`
	Event        string     `json:"event"`
	Sandbox      string     `json:"sandbox"`
	Attempt      int        `json:"attempt"`
	Status       string     `json:"status"`
	ResponseCode int        `json:"response_code"`
	Error        string     `json:"error"`
	NextAt       *time.Time `json:"next_attempt_at"`
}

func (e *env) addHook(body any) hookAnswer {
	e.t.Helper()
	var h hookAnswer
	e.do("POST", "/v1/webhooks", e.admin, body).want(e.t, 201, "").json(e.t, &h)
	return h
}

func TestWebhookInput(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		h := e.addHook(map[string]any{"url": "https://example.com/froog", "name": "prod"})
		if !strings.HasPrefix(h.ID, "wh_") || !strings.HasPrefix(h.Secret, "whsec_") || !h.Enabled || len(h.Events) != 0 || h.Name != "prod" {
			t.Fatalf("created: %+v", h)
		}
		for _, tc := range []struct {
			name, method, path string
			body               any
			status             int
			code               string
		}{
			{"no body", "POST", "/v1/webhooks", "", 400, "invalid_json"},
			{"no url", "POST", "/v1/webhooks", map[string]any{"name": "x"}, 400, "invalid_value"},
			{"http", "POST", "/v1/webhooks", map[string]any{"url": "http://example.com/"}, 400, "invalid_value"},
			{"no host", "POST", "/v1/webhooks", map[string]any{"url": "https:///x"}, 400, "invalid_value"},
			{"credentials", "POST", "/v1/webhooks", map[string]any{"url": "https://u:p@example.com/"}, 400, "invalid_value"},
			{"fragment", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com/#x"}, 400, "invalid_value"},
			{"bad port", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com:99999/"}, 400, "invalid_value"},
			{"long url", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com/" + strings.Repeat("a", 2100)}, 400, "invalid_value"},
			{"url not a string", "POST", "/v1/webhooks", map[string]any{"url": 5}, 400, ""},
			{"unknown event", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com/", "events": []string{"sandbox.exploded"}}, 400, "invalid_value"},
			{"event twice", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com/", "events": []string{"sandbox.error", "sandbox.error"}}, 400, "invalid_value"},
			{"unknown field", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com/", "secret": "mine"}, 400, ""},
			{"long name", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com/", "name": strings.Repeat("n", 101)}, 400, "invalid_value"},
			{"control name", "POST", "/v1/webhooks", map[string]any{"url": "https://example.com/", "name": "a\x00b"}, 400, "invalid_value"},
			{"patch http", "PATCH", "/v1/webhooks/" + h.ID, map[string]any{"url": "http://example.com/"}, 400, "invalid_value"},
			{"patch events type", "PATCH", "/v1/webhooks/" + h.ID, map[string]any{"events": "sandbox.error"}, 400, "invalid_value"},
			{"patch enabled type", "PATCH", "/v1/webhooks/" + h.ID, map[string]any{"enabled": "no"}, 400, ""},
			{"patch empty", "PATCH", "/v1/webhooks/" + h.ID, "", 400, "invalid_json"},
			{"patch unknown", "PATCH", "/v1/webhooks/wh_0000000000000000", map[string]any{"enabled": false}, 404, "not_found"},
			{"not an id", "GET", "/v1/webhooks/key_1", nil, 404, "not_found"},
			{"limit 0", "GET", "/v1/webhooks/" + h.ID + "/deliveries?limit=0", nil, 400, "invalid_value"},
			{"limit 201", "GET", "/v1/webhooks/" + h.ID + "/deliveries?limit=201", nil, 400, "invalid_value"},
			{"unknown query", "GET", "/v1/webhooks/" + h.ID + "/deliveries?since=1", nil, 400, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(tc.method, tc.path, e.admin, tc.body)
				r.want(t, tc.status, tc.code)
				if strings.Contains(string(r.body), h.Secret) {
					t.Fatal("an error answer holds the signing secret")
				}
			})
		}
		// Nothing malformed was stored.
		var list struct{ Webhooks []hookAnswer }
		e.do("GET", "/v1/webhooks", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list.Webhooks) != 1 {
			t.Fatalf("got %d endpoints, want 1", len(list.Webhooks))
		}

		// PATCH: name removed with "", events set, paused; the secret stays.
		var p hookAnswer
		e.do("PATCH", "/v1/webhooks/"+h.ID, e.admin, map[string]any{"name": "", "events": []string{"sandbox.stopped"}, "enabled": false}).want(t, 200, "").json(t, &p)
		if p.Name != "" || p.Enabled || len(p.Events) != 1 || p.Secret != "" {
			t.Fatalf("patched: %+v", p)
		}
		// At most 10.
		for i := 1; i < store.MaxWebhooksPerAccount; i++ {
			e.addHook(map[string]any{"url": fmt.Sprintf("https://example.com/%d", i)})
		}
		e.do("POST", "/v1/webhooks", e.admin, map[string]any{"url": "https://example.com/11"}).want(t, 429, "limit_reached")
	})
}

func TestWebhookScope(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		h := e.addHook(map[string]any{"url": "https://example.com/froog"})
		reader := e.key("reader", "account.read", "sandbox.read")
		labelled := e.keyWith("team-a", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, "*")
		named := e.keyWith("box", func(k *store.APIKey) { k.Sandboxes = []string{"box"} }, "account.admin")
		for _, tc := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/v1/webhooks", nil},
			{"POST", "/v1/webhooks", map[string]any{"url": "https://example.com/x"}},
			{"GET", "/v1/webhooks/" + h.ID, nil},
			{"PATCH", "/v1/webhooks/" + h.ID, map[string]any{"enabled": false}},
			{"DELETE", "/v1/webhooks/" + h.ID, nil},
			{"GET", "/v1/webhooks/" + h.ID + "/deliveries", nil},
			{"POST", "/v1/webhooks/" + h.ID + "/rotate", nil},
			{"POST", "/v1/webhooks/" + h.ID + "/test", nil},
		} {
			t.Run(tc.method+" "+tc.path, func(t *testing.T) {
				e.do(tc.method, tc.path, reader, tc.body).want(t, 403, "api_key_action_forbidden")
				e.do(tc.method, tc.path, "", tc.body).want(t, 401, "")
				for _, k := range []string{labelled, named} {
					r := e.do(tc.method, tc.path, k, tc.body)
					if tc.method == "GET" && tc.path == "/v1/webhooks" {
						r.want(t, 200, "")
						if strings.Contains(string(r.body), h.ID) {
							t.Fatalf("a limited key learns of the endpoint: %s", r.body)
						}
						continue
					}
					r.want(t, 403, "api_key_sandbox_forbidden")
				}
			})
		}
		// Another account's admin finds nothing.
		other, err := e.store.CreateAccount(context.Background(), store.Account{Name: "other", MaxSandboxes: 1, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		secret, k := api.NewAPIKey(other.ID, "admin", []string{"*"}, 0, time.Now())
		if _, err := e.store.CreateAPIKey(context.Background(), k, nil); err != nil {
			t.Fatal(err)
		}
		e.do("GET", "/v1/webhooks/"+h.ID, secret, nil).want(t, 404, "not_found")
		e.do("DELETE", "/v1/webhooks/"+h.ID, secret, nil).want(t, 404, "not_found")

		// The secret is shown at create and rotate only.
		got := e.do("GET", "/v1/webhooks/"+h.ID, e.admin, nil).want(t, 200, "")
		list := e.do("GET", "/v1/webhooks", e.admin, nil).want(t, 200, "")
		if strings.Contains(string(got.body), "whsec_") || strings.Contains(string(list.body), "whsec_") {
			t.Fatal("a GET answer holds the signing secret")
		}
		var rot hookAnswer
		e.do("POST", "/v1/webhooks/"+h.ID+"/rotate", e.admin, nil).want(t, 200, "").json(t, &rot)
		if !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == h.Secret || rot.ID != h.ID {
			t.Fatalf("rotate: %+v", rot)
		}
		var audit struct {
			Events []struct{ Action, Target string } `json:"events"`
		}
		r := e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "")
		r.json(t, &audit)
		if len(audit.Events) < 2 || audit.Events[0].Action != "webhook.rotate" || strings.Contains(string(r.body), "example.com") {
			t.Fatalf("audit (no URL in it): %s", r.body)
		}
		e.do("DELETE", "/v1/webhooks/"+h.ID, e.admin, nil).want(t, 200, "")
		e.do("GET", "/v1/webhooks/"+h.ID, e.admin, nil).want(t, 404, "not_found")
		for _, s := range []string{h.Secret, rot.Secret} {
			if strings.Contains(e.logs.String(), s) {
				t.Fatal("a log line holds a signing secret")
			}
		}
	})
}

// TestWebhookSSRF: endpoints on non-public addresses are refused when
// added, and again when sent to, after the name resolves.
func TestWebhookSSRF(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ip      string
		blocked bool
	}{
		{"127.0.0.1", true}, {"127.3.2.1", true}, {"::1", true}, {"10.1.2.3", true}, {"172.16.0.1", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"100.64.0.1", true}, {"0.0.0.0", true}, {"::", true}, {"224.0.0.1", true}, {"ff02::1", true},
		{"fe80::1", true}, {"fd00::1", true}, {"fc00::1", true}, {"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"::ffff:169.254.169.254", true},
		{"64:ff9b::a00:1", true}, {"2002:a00:1::", true}, {"255.255.255.255", true}, {"198.18.0.1", true}, {"240.0.0.1", true},
		{"93.184.215.14", false}, {"2606:4700::1111", false}, {"1.1.1.1", false}, {"::ffff:1.1.1.1", false},
	} {
		if got := api.BlockedWebhookIP(netip.MustParseAddr(tc.ip)); got != tc.blocked {
			t.Errorf("BlockedWebhookIP(%s) = %v, want %v", tc.ip, got, tc.blocked)
		}
	}

	// A name this test's resolver sends to 10.x, another to loopback.
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "internal.example.com":
			return []netip.Addr{netip.MustParseAddr("10.20.30.40")}, nil
		case "rebind.example.com":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b.open(t), api.Options{Webhooks: api.WebhookOptions{Lookup: lookup}})
			for _, u := range []string{"https://127.0.0.1/", "https://[::1]/", "https://169.254.169.254/latest/meta-data/", "https://10.0.0.1/",
				"https://[::ffff:127.0.0.1]/", "https://[fe80::1%25eth0]/", "https://0.0.0.0/", "https://100.100.100.200/", "https://[fd12::1]:8443/",
				"https://localhost/", "https://app.localhost/", "https://2130706433/", "https://0x7f.1/", "https://127.1/", "https://metadata.google.internal/"} {
				r := e.do("POST", "/v1/webhooks", e.admin, map[string]any{"url": u})
				r.want(t, 400, "invalid_value")
			}
			h := e.addHook(map[string]any{"url": "https://example.com/"})
			e.do("PATCH", "/v1/webhooks/"+h.ID, e.admin, map[string]any{"url": "https://[::1]:443/"}).want(t, 400, "invalid_value")
			// Names pass at create and are refused after they resolve.
			for _, host := range []string{"internal.example.com", "rebind.example.com"} {
				hk := e.addHook(map[string]any{"url": "https://" + host + "/hook"})
				var a attemptAnswer
				e.do("POST", "/v1/webhooks/"+hk.ID+"/test", e.admin, nil).want(t, 200, "").json(t, &a)
				if a.Status != "failed" || a.ResponseCode != 0 || !strings.Contains(a.Error, "not public") || a.Event != "ping" {
					t.Fatalf("%s: ping %+v, want refused", host, a)
				}
				e.do("DELETE", "/v1/webhooks/"+hk.ID, e.admin, nil).want(t, 200, "")
			}
		})
	}

	// A redirect to loopback is not followed. The redirector is itself on
	// loopback, so this server has the test-only option on: what stops the
	// redirect is that none is followed.
	var hits atomic.Int32
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/internal", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	roots := x509.NewCertPool()
	roots.AddCert(redirector.Certificate())
	roots.AddCert(target.Certificate())
	e := newEnv(t, backends[0].open(t), api.Options{Webhooks: api.WebhookOptions{AllowPrivateTargets: true, RootCAs: roots}})
	h := e.addHook(map[string]any{"url": redirector.URL + "/hook"})
	var a attemptAnswer
	e.do("POST", "/v1/webhooks/"+h.ID+"/test", e.admin, nil).want(t, 200, "").json(t, &a)
	if a.Status != "failed" || a.ResponseCode != 307 || !strings.Contains(a.Error, "redirects are not followed") {
		t.Fatalf("redirect: %+v", a)
	}
	if hits.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

// receiver is an HTTPS endpoint that checks every request's signature
// and headers, and answers from a script.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret atomic.Value // string
	mu     sync.Mutex
	got    []received
	codes  []int // answers, in turn; then 200
}

type received struct {
	event, delivery, attempt, webhook string
	body                              map[string]any
}

func newReceiver(t *testing.T, codes ...int) *receiver {
	rc := &receiver{t: t, codes: codes}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		secret, _ := rc.secret.Load().(string)
		sig := r.Header.Get("froog-signature")
		var ts int64
		fmt.Sscanf(sig, "t=%d,", &ts)
		if want := api.WebhookSignature(secret, ts, raw); sig == "" || sig != want {
			t.Errorf("bad signature %q on %s", sig, raw)
			w.WriteHeader(401)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("body %s: %v", raw, err)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.got = append(rc.got, received{r.Header.Get("froog-event"), r.Header.Get("froog-delivery"), r.Header.Get("froog-attempt"), r.Header.Get("froog-webhook"), body})
		code := 200
		if len(rc.codes) > 0 {
			code, rc.codes = rc.codes[0], rc.codes[1:]
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, 500, 500)
			roots := x509.NewCertPool()
			roots.AddCert(rc.srv.Certificate())
			clock := testkit.NewFakeClock(time.Now())
			e := newEnv(t, b.open(t), api.Options{Now: clock.Now, Webhooks: api.WebhookOptions{AllowPrivateTargets: true, RootCAs: roots}})
			srv := e.handler.(*api.Server)
			h := e.addHook(map[string]any{"url": rc.srv.URL + "/froog", "events": []string{"sandbox.running"}})
			rc.secret.Store(h.Secret)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); srv.DeliverWebhooks(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			sb, err := e.store.CreateSandbox(ctx, store.Sandbox{AccountID: e.account.ID, Name: "box", State: store.StateCreating, DesiredState: store.StateRunning, CreatedAt: e.now()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range []string{store.StateRunning, store.StateStopped} { // stopped is filtered out
				if _, err := e.store.UpdateSandbox(ctx, sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error { x.State = st; return nil }, nil); err != nil {
					t.Fatal(err)
				}
			}
			wait.For(t, 10*time.Second, "the first attempt", func() bool { return len(rc.received()) == 1 })
			// The next attempt waits 5 s on the server's clock, then 30 s.
			// At 4 s, a second of real time (the sender looks once a
			// second, webhookPoll) brings none.
			clock.Advance(4 * time.Second)
			time.Sleep(time.Second)
			if n := len(rc.received()); n != 1 {
				t.Fatalf("%d attempts 4 s after the first on the server's clock, want 1", n)
			}
			clock.Advance(time.Second)
			wait.For(t, 10*time.Second, "the second attempt", func() bool { return len(rc.received()) == 2 })
			clock.Advance(30 * time.Second)
			wait.For(t, 10*time.Second, "the third attempt", func() bool { return len(rc.received()) == 3 })

			got := rc.received()
			for i, r := range got {
				sbv, _ := r.body["sandbox"].(map[string]any)
				if r.event != "sandbox.running" || r.delivery != got[0].delivery || r.attempt != fmt.Sprint(i+1) || r.webhook != h.ID ||
					r.body["id"] != r.delivery || r.body["type"] != "sandbox.running" || sbv["name"] != "box" || sbv["state"] != "running" {
					t.Fatalf("request %d: %+v", i+1, r)
				}
			}
			var log struct{ Deliveries []attemptAnswer }
			wait.For(t, 5*time.Second, "three logged attempts", func() bool {
				e.do("GET", "/v1/webhooks/"+h.ID+"/deliveries", e.admin, nil).want(t, 200, "").json(t, &log)
				return len(log.Deliveries) == 3
			})
			d := log.Deliveries
			if d[0].Status != "delivered" || d[0].Attempt != 3 || d[0].ResponseCode != 200 || d[0].NextAt != nil ||
				d[1].Status != "failed" || d[1].ResponseCode != 500 || d[1].NextAt == nil || d[2].Attempt != 1 || d[2].Sandbox != "box" {
				t.Fatalf("log: %+v", d)
			}
			// A ping is logged too; a paused endpoint gets no events.
			e.do("POST", "/v1/webhooks/"+h.ID+"/test", e.admin, nil).want(t, 200, "")
			e.do("PATCH", "/v1/webhooks/"+h.ID, e.admin, map[string]any{"enabled": false}).want(t, 200, "")
			if _, err := e.store.UpdateSandbox(ctx, sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error { x.State = store.StateRunning; return nil }, nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			if n := len(rc.received()); n != 4 || rc.received()[3].event != "ping" {
				t.Fatalf("after pause: %d requests (want the 3 and the ping)", n)
			}
			if strings.Contains(e.logs.String(), h.Secret) {
				t.Fatal("a log line holds the signing secret")
			}
		})
	}
}
