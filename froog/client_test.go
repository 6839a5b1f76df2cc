package froog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI is an httptest server standing in for froog's API: each test
// hands it the answers it wants, and it records what it was sent.
type fakeAPI struct {
	mu    sync.Mutex
	seen  []*http.Request
	keys  []string // Idempotency-Key of each request
	auths []string
}

func (f *fakeAPI) record(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, r)
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	f.auths = append(f.auths, r.Header.Get("Authorization"))
}

// newFake serves h and returns a Client on it whose retries wait no real
// time: the waits are recorded in *waits.
func newFake(t *testing.T, h func(f *fakeAPI, n int, w http.ResponseWriter, r *http.Request)) (*Client, *fakeAPI, *[]time.Duration) {
	t.Helper()
	f := &fakeAPI{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.record(r)
		f.mu.Lock()
		n := len(f.seen)
		f.mu.Unlock()
		h(f, n, w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := NewWithOptions(Options{APIKey: "froog_testkey", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.raw.Client.(*doer).sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	return c, f, &waits
}

func apiError(w http.ResponseWriter, status int, code, msg string, hdr ...string) {
	for i := 0; i+1 < len(hdr); i += 2 {
		w.Header().Set(hdr[i], hdr[i+1])
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_123")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error": {"code": %q, "message": %q, "request_id": "req_123"}}`, code, msg)
}

func TestErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		status           int
		body, ctype      string
		wantCode, wantIn string
	}{
		{"api error", 404, `{"error": {"code": "not_found", "message": "no sandbox named x", "request_id": "req_123"}}`, "application/json", "not_found", "no sandbox named x"},
		{"a proxy's page", 502, `<html>bad gateway</html>`, "text/html", "", "Bad Gateway"},
		{"plain text", 400, `nope`, "text/plain", "", "Bad Request: nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, _ := newFake(t, func(_ *fakeAPI, _ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.Header().Set("X-Request-Id", "req_123")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := c.Sandbox("x").Info(context.Background())
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("got %T %v, want *froog.Error", err, err)
			}
			if fe.Status != tc.status || fe.Code != tc.wantCode || !strings.Contains(fe.Message, tc.wantIn) || fe.RequestID != "req_123" {
				t.Fatalf("got %+v, want status %d code %q message with %q, request req_123", fe, tc.status, tc.wantCode, tc.wantIn)
			}
			if strings.Contains(err.Error(), "froog_testkey") {
				t.Fatalf("the error names the key: %v", err)
			}
		})
	}
}

// 429 and 503 are retried after their Retry-After, with the same
// Idempotency-Key, up to Retries; other errors, and waits past
// MaxRetryWait, are not.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		fail       int // answers that fail before one succeeds
		status     int
		retryAfter string
		wantTries  int
		wantErr    int
		wantWaits  []time.Duration
	}{
		{"429 then ok", 2, 429, "2", 3, 0, []time.Duration{2 * time.Second, 2 * time.Second}},
		{"503 then ok", 1, 503, "1", 2, 0, []time.Duration{time.Second}},
		{"429 past the retries", 9, 429, "1", 4, 429, []time.Duration{time.Second, time.Second, time.Second}},
		{"Retry-After past the longest wait", 1, 429, "3600", 1, 429, nil},
		{"409 is not retried", 1, 409, "1", 1, 409, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, f, waits := newFake(t, func(_ *fakeAPI, n int, w http.ResponseWriter, r *http.Request) {
				if n <= tc.fail {
					apiError(w, tc.status, "limit_reached", "starts per minute", "Retry-After", tc.retryAfter)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if r.Method == "POST" {
					w.WriteHeader(202)
				}
				io.WriteString(w, `{"name": "box", "state": "running"}`)
			})
			_, err := c.Sandboxes.Create(context.Background(), CreateSandbox{Name: Ptr("box")})
			var fe *Error
			if tc.wantErr == 0 && err != nil || tc.wantErr != 0 && (!errors.As(err, &fe) || fe.Status != tc.wantErr) {
				t.Fatalf("got %v, want status %d", err, tc.wantErr)
			}
			posts := 0
			for i, r := range f.seen {
				if r.Method == "POST" {
					posts++
					if f.keys[i] == "" || f.keys[i] != f.keys[0] {
						t.Fatalf("Idempotency-Key %d: %q, want the first's %q", i, f.keys[i], f.keys[0])
					}
				}
				if f.auths[i] != "Bearer froog_testkey" {
					t.Fatalf("Authorization %q", f.auths[i])
				}
			}
			if posts != tc.wantTries {
				t.Fatalf("got %d tries, want %d", posts, tc.wantTries)
			}
			if fmt.Sprint(*waits) != fmt.Sprint(tc.wantWaits) {
				t.Fatalf("waited %v, want %v", *waits, tc.wantWaits)
			}
		})
	}
}

// Create and fork send an Idempotency-Key, a new one per call.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	c, f, _ := newFake(t, func(_ *fakeAPI, _ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			w.WriteHeader(202)
		}
		io.WriteString(w, `{"name": "b", "state": "running"}`)
	})
	ctx := context.Background()
	if _, err := c.Sandboxes.Create(ctx, CreateSandbox{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandbox("a").Fork(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Create(ctx, CreateSandbox{}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, r := range f.seen {
		if r.Method == "POST" {
			keys = append(keys, f.keys[i])
		} else if f.keys[i] != "" {
			t.Fatalf("%s %s has an Idempotency-Key", r.Method, r.URL.Path)
		}
	}
	if len(keys) != 3 || keys[0] == "" || keys[1] == "" || keys[2] == "" || keys[0] == keys[1] || keys[0] == keys[2] {
		t.Fatalf("got keys %q, want three different ones", keys)
	}
}

func TestExecStream(t *testing.T) {
	t.Parallel()
	c, _, _ := newFake(t, func(_ *fakeAPI, _ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range []string{`{"type":"started","command_id":"cmd_1"}`, `{"type":"stdout","data":"hi\n"}`, ``, `{"type":"stderr","data":"oops"}`, `{"type":"exit","exit_code":3}`} {
			io.WriteString(w, l+"\n")
			w.(http.Flusher).Flush()
		}
	})
	var got []string
	for e, err := range c.Sandbox("box").ExecStream(context.Background(), "x", nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, Text(e.Type)+":"+Text(e.Data)+Text(e.ExitCode))
	}
	if want := "[started: stdout:hi\n stderr:oops exit:3]"; fmt.Sprint(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"ftp://x", "not a url", "http://"} {
		if _, err := NewWithOptions(Options{URL: u}); err == nil {
			t.Errorf("%q: no error", u)
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		min, max time.Duration
	}{
		{"5", 5 * time.Second, 5 * time.Second},
		{"0", 0, 0},
		{"", 0, 0},
		{"soon", 0, 0},
		{"-3", 0, 0},
		{time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), 80 * time.Second, 90 * time.Second},
		{time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, 0},
	} {
		if got := retryAfter(tc.in); got < tc.min || got > tc.max {
			t.Errorf("retryAfter(%q) = %v, want %v to %v", tc.in, got, tc.min, tc.max)
		}
	}
}

// Restore waits for the restore, not for "running": the sandbox runs its
// old disk until the restore begins (restore_from set), and one in error
// is what a restore recovers.
func TestRestoreWaitsForTheRestore(t *testing.T) {
	t.Parallel()
	states := []string{
		`"state": "running", "restore_from": "snap_1"`,
		`"state": "stopped", "restore_from": "snap_1"`,
		`"state": "error", "error": "crashed", "restore_from": "snap_1"`,
		`"state": "running"`,
	}
	c, f, _ := newFake(t, func(_ *fakeAPI, n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			w.WriteHeader(202)
			io.WriteString(w, `{"name": "b", "state": "error", "restore_from": "snap_1"}`)
			return
		}
		io.WriteString(w, `{"name": "b", `+states[min(n-2, len(states)-1)]+`}`)
	})
	sb, err := c.Sandbox("b").Restore(context.Background(), "snap_1")
	if err != nil || Text(sb.State) != "running" || Text(sb.RestoreFrom) != "" {
		t.Fatalf("Restore: %+v, %v; want running, the restore done", sb, err)
	}
	if len(f.seen) != 1+len(states) {
		t.Fatalf("%d requests, want the POST and %d reads", len(f.seen), len(states))
	}
}
