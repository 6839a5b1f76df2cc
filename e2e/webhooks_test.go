package e2e_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// hookReceiver is a webhook endpoint on loopback, over HTTPS with a
// certificate of its own (froogd trusts it through FROOG_TEST_WEBHOOK_CA,
// which only test builds read). It checks every request's signature with
// the secret it was told for the endpoint, writes the request down, and
// answers 500 to the first fails[type] attempts of each event.
type hookReceiver struct {
	srv    *httptest.Server
	caFile string

	mu      sync.Mutex
	secrets map[string]string // endpoint id → signing secret
	fails   map[string]int    // event type → attempts answered 500
	got     []hookRequest
}

type hookRequest struct {
	Event, Delivery, Webhook string
	Attempt                  int
	Verified                 bool // the signature verifies with the endpoint's secret as told
	T                        int64
	Body                     struct {
		ID, Type, Reason string
		CreatedAt        time.Time `json:"created_at"`
		Sandbox          *struct{ Name, State string }
	}
	Code int // what the receiver answered
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{secrets: map[string]string{}, fails: map[string]int{}}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	h.caFile = filepath.Join(t.TempDir(), "receiver-ca.pem")
	if err := os.WriteFile(h.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// env is what froogd needs to reach the receiver.
func (h *hookReceiver) env() string { return "FROOG_TEST_WEBHOOK_CA=" + h.caFile }

// verify checks froog-signature over body with secret.
func verifyHook(secret, header string, body []byte) (int64, bool) {
	var t int64
	var v1 string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			t, _ = strconv.ParseInt(v, 10, 64)
		case "v1":
			v1 = v
		}
	}
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", t)
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	return t, secret != "" && t != 0 && hmac.Equal([]byte(want), []byte(v1))
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	q := hookRequest{Event: r.Header.Get("froog-event"), Delivery: r.Header.Get("froog-delivery"), Webhook: r.Header.Get("froog-webhook")}
	q.Attempt, _ = strconv.Atoi(r.Header.Get("froog-attempt"))
	q.T, q.Verified = verifyHook(h.secrets[q.Webhook], r.Header.Get("froog-signature"), raw)
	json.Unmarshal(raw, &q.Body)
	q.Code = http.StatusOK
	if q.Attempt <= h.fails[q.Event] {
		q.Code = http.StatusInternalServerError
	}
	h.got = append(h.got, q)
	w.WriteHeader(q.Code)
}

func (h *hookReceiver) tell(id, secret string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secrets[id] = secret
}

func (h *hookReceiver) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// of lists the requests for one event type.
func (h *hookReceiver) of(event string) []hookRequest {
	var out []hookRequest
	for _, q := range h.requests() {
		if q.Event == event {
			out = append(out, q)
		}
	}
	return out
}

// TestWebhooksThroughFroogd: froogd dev sends a sandbox's events to a
// receiver that checks their signatures, retries on the docs' schedule
// (the test clock moves it) after two 500s, and logs every attempt.
func TestWebhooksThroughFroogd(t *testing.T) {
	// Alone: it moves the test clock of a froogd of its own.
	rc := newHookReceiver(t)
	rc.fails["sandbox.running"] = 2
	d := startDev(t, devOptions{clock: true, env: []string{rc.env()}})
	c := d.c

	var h struct{ ID, Secret string }
	c.call("POST", "/v1/webhooks", fmt.Sprintf(`{"url": %q, "name": "e2e"}`, rc.srv.URL+"/froog"), 201, &h)
	rc.tell(h.ID, h.Secret)
	c.call("POST", "/v1/sandboxes", `{"name": "hooked"}`, 202, nil)

	wait.For(t, 30*time.Second, "the first sandbox.running attempt", func() bool { return len(rc.of("sandbox.running")) == 1 })
	wait.For(t, 5*time.Second, "the first attempt logged", func() bool {
		var log struct{ Deliveries []struct{ Attempt int } }
		c.call("GET", "/v1/webhooks/"+h.ID+"/deliveries", "", 200, &log)
		return len(log.Deliveries) == 1
	})
	// The retry is due 5 s later on froogd's clock (real time, moved on
	// by the test): a second (the sender looks once a second) brings none.
	time.Sleep(time.Second)
	if n := len(rc.of("sandbox.running")); n != 1 {
		t.Fatalf("%d attempts before 5 s passed on froogd's clock, want 1", n)
	}
	d.advance(t, 5*time.Second)
	wait.For(t, 10*time.Second, "the second attempt", func() bool { return len(rc.of("sandbox.running")) == 2 })
	d.advance(t, 30*time.Second)
	wait.For(t, 10*time.Second, "the third attempt", func() bool { return len(rc.of("sandbox.running")) == 3 })

	c.call("POST", "/v1/sandboxes/hooked/stop", "", 202, nil)
	wait.For(t, 30*time.Second, "sandbox.stopped", func() bool { return len(rc.of("sandbox.stopped")) == 1 })
	c.call("DELETE", "/v1/sandboxes/hooked", "", 202, nil)
	wait.For(t, 30*time.Second, "sandbox.deleted", func() bool { return len(rc.of("sandbox.deleted")) == 1 })

	running := rc.of("sandbox.running")
	for i, q := range running {
		if q.Attempt != i+1 || q.Delivery != running[0].Delivery || q.Body.ID != q.Delivery {
			t.Fatalf("running attempt %d: %+v", i+1, q)
		}
	}
	if running[0].Code != 500 || running[1].Code != 500 || running[2].Code != 200 {
		t.Fatalf("answers: %d %d %d", running[0].Code, running[1].Code, running[2].Code)
	}
	for _, q := range rc.requests() {
		if !q.Verified || q.Webhook != h.ID || q.Body.Type != q.Event || q.Body.Sandbox == nil || q.Body.Sandbox.Name != "hooked" {
			t.Fatalf("request %+v: want signed with the endpoint's secret, for hooked", q)
		}
		// t is froogd's clock at the send: within the receiver's 5 minutes.
		if now := time.Now().Add(35 * time.Second).Unix(); q.T < now-300 || q.T > now+300 {
			t.Fatalf("froog-signature's t %d is far from now (%d)", q.T, now)
		}
	}
	if s := rc.of("sandbox.stopped")[0].Body.Sandbox.State; s != "stopped" {
		t.Fatalf("sandbox.stopped carries the sandbox %s", s)
	}

	// The log: every attempt, newest first.
	var log struct {
		Deliveries []struct {
			EventID      string `json:"event_id"`
			Event        string
			Attempt      int
			Status       string
			ResponseCode int `json:"response_code"`
		}
	}
	wait.For(t, 5*time.Second, "five attempts logged", func() bool {
		c.call("GET", "/v1/webhooks/"+h.ID+"/deliveries?limit=200", "", 200, &log)
		return len(log.Deliveries) == 5
	})
	var seen []string
	for _, a := range log.Deliveries {
		seen = append(seen, fmt.Sprintf("%s#%d:%s/%d", a.Event, a.Attempt, a.Status, a.ResponseCode))
	}
	want := "sandbox.deleted#1:delivered/200 sandbox.stopped#1:delivered/200 sandbox.running#3:delivered/200 sandbox.running#2:failed/500 sandbox.running#1:failed/500"
	if got := strings.Join(seen, " "); got != want {
		t.Fatalf("log:\n got %s\nwant %s", got, want)
	}

	// A ping is signed and logged; after a rotate the old secret signs
	// nothing more.
	var ping struct{ Status string }
	c.call("POST", "/v1/webhooks/"+h.ID+"/test", "", 200, &ping)
	if p := rc.of("ping"); ping.Status != "delivered" || len(p) != 1 || !p[0].Verified {
		t.Fatalf("ping: %+v, %+v", ping, p)
	}
	var rot struct{ Secret string }
	c.call("POST", "/v1/webhooks/"+h.ID+"/rotate", "", 200, &rot)
	c.call("POST", "/v1/webhooks/"+h.ID+"/test", "", 200, nil)
	if p := rc.of("ping"); len(p) != 2 || p[1].Verified {
		t.Fatal("after a rotate, a ping still verifies with the old secret")
	}
	rc.tell(h.ID, rot.Secret)
	c.call("POST", "/v1/webhooks/"+h.ID+"/test", "", 200, nil)
	if p := rc.of("ping"); len(p) != 3 || !p[2].Verified {
		t.Fatal("after a rotate, a ping does not verify with the new secret")
	}
}
