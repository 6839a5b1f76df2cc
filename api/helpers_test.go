package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/api/contract"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/store/pg/pgtest"
	"froog.tech/froog/wake"
)

// backends are the stores every API test runs against.
var backends = []struct {
	name string
	open func(t testing.TB) store.Store
}{
	{"embedded", func(t testing.TB) store.Store {
		s, err := embedded.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"postgres", func(t testing.TB) store.Store {
		s, err := pg.Open(context.Background(), pgtest.Options(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

// forEachStore runs fn once per store, in parallel subtests.
func forEachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, b.open(t), api.Options{}))
		})
	}
}

// forEachStoreAt is forEachStore with the server's clock a fake one at
// at, which fn moves.
func forEachStoreAt(t *testing.T, at time.Time, fn func(t *testing.T, e *env, clock *testkit.FakeClock)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := testkit.NewFakeClock(at)
			fn(t, newEnv(t, b.open(t), api.Options{Now: clock.Now}), clock)
		})
	}
}

// env is an API server on loopback with an account and an admin key.
type env struct {
	t       testing.TB
	store   store.Store
	handler http.Handler
	srv     *httptest.Server
	account store.Account
	admin   string
	logs    *syncbuf.Buffer
}

func newEnv(t testing.TB, s store.Store, o api.Options) *env {
	t.Helper()
	t.Cleanup(func() { s.Close() })
	e := &env{t: t, store: s, logs: &syncbuf.Buffer{}}
	key := make([]byte, 32)
	rand.Read(key)
	o.Store, o.Domain, o.SecretKey, o.PublicPort = s, "froog.test", key, 8443
	o.Logger = slog.New(slog.NewJSONHandler(e.logs, nil))
	if o.Sessions != nil && o.Waker == nil {
		o.Waker = newWaker(t, s, o.Sessions)
	}
	srv, err := api.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.handler = srv
	e.srv = httptest.NewServer(srv)
	t.Cleanup(e.srv.Close)
	e.account, err = s.CreateAccount(context.Background(), store.Account{Name: "test", MaxSandboxes: 5, URLNamesPerDay: 20, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	e.admin = e.key("admin", "*")
	return e
}

// newWaker is the API's waker as froogd wires it: a Follower of the
// store's feed, and the tunnel (when sessions is one) to reach ports.
func newWaker(t testing.TB, s store.Store, sessions api.Sessions) *wake.Waker {
	t.Helper()
	fl, err := wake.NewFollower(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	d, _ := sessions.(wake.Dialer)
	w, err := wake.New(wake.Options{Store: s, Feed: fl, Dialer: d})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// key makes an API key with actions and returns its secret.
func (e *env) key(name string, actions ...string) string {
	return e.keyWith(name, func(*store.APIKey) {}, actions...)
}

func (e *env) keyWith(name string, edit func(*store.APIKey), actions ...string) string {
	e.t.Helper()
	secret, k := api.NewAPIKey(e.account.ID, name, actions, 0, time.Now())
	edit(&k)
	if _, err := e.store.CreateAPIKey(context.Background(), k, nil); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into v, zeroed first: a test that polls into
// the same value must not see an earlier answer's fields where this
// one omits them.
func (r response) json(t testing.TB, v any) {
	t.Helper()
	p := reflect.ValueOf(v)
	if p.Kind() != reflect.Pointer || p.IsNil() {
		t.Fatalf("decode into %T: want a non-nil pointer", v)
	}
	p.Elem().SetZero()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) code(t testing.TB) string {
	t.Helper()
	var b struct {
		Error struct{ Code, Message, RequestID string } `json:"error"`
	}
	json.Unmarshal(r.body, &b)
	return b.Error.Code
}

// do sends a request with the key (none when key is "").
func (e *env) do(method, path, key string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// want checks a status (and error code when code is not "").
func (r response) want(t testing.TB, status int, code string) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("got status %d, want %d: %s", r.status, status, r.body)
	}
	if code != "" && r.code(t) != code {
		t.Fatalf("got code %q, want %q: %s", r.code(t), code, r.body)
	}
	return r
}

// TestMain checks every /v1 answer the tests get through
// http.DefaultTransport (env.do, and the few that send their own) against
// the OpenAPI document: one that breaks it fails the request where it was
// made, and the run at its end.
func TestMain(m *testing.M) {
	c, err := contract.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "the OpenAPI document: %v\n", err)
		os.Exit(1)
	}
	check := &contract.Transport{Checker: c, Next: http.DefaultTransport}
	http.DefaultTransport = check
	code := m.Run()
	if v := check.Violations(); len(v) > 0 {
		for _, s := range v {
			fmt.Fprintf(os.Stderr, "contract: %s\n", s)
		}
		fmt.Fprintf(os.Stderr, "%d answers broke the OpenAPI document (api/openapi.json)\n", len(v))
		code = max(code, 1)
	}
	os.Exit(code)
}

func (e *env) now() time.Time { return store.Micro(time.Now()) }
