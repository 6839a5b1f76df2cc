package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/api"
)

// fakeBody is a request body that records whether anyone read it.
type fakeBody struct{ read atomic.Bool }

func (b *fakeBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return 0, errors.New("the body of an unauthenticated request was read")
}

// No handler reads the body of a request that has no valid key: every
// route refuses it first.
func TestAuthBeforeBody(t *testing.T) {
	e := newEnv(t, backends[0].open(t), api.Options{})
	for _, rt := range api.Routes() {
		if rt == "GET /v1/openapi.json" {
			continue // public
		}
		for _, key := range []string{"", api.NewSecret(api.KeyPrefix)} {
			t.Run(fmt.Sprintf("%s key=%t", rt, key != ""), func(t *testing.T) {
				method, path, _ := strings.Cut(rt, " ")
				path = strings.NewReplacer("{name}", "x", "{port}", "1", "{id}", "x").Replace(path)
				body := &fakeBody{}
				req := httptest.NewRequest(method, path, io.NopCloser(body))
				req.ContentLength = 1 << 20
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				w := httptest.NewRecorder()
				e.handler.ServeHTTP(w, req)
				want := 401
				if strings.HasPrefix(path, "/v1/files/") {
					want = 403 // signed file links: the token in the query is the key
				}
				if w.Code != want {
					t.Fatalf("got %d, want %d: %s", w.Code, want, w.Body)
				}
				if body.read.Load() {
					t.Fatal("the body was read before the key was checked")
				}
			})
		}
	}
}

// Over a real connection, a request without a valid key is answered at
// once, whatever its body: the server neither waits for a slow body nor
// reads what is there (net/http would otherwise drain up to 256 KiB of
// it before answering), and closes the connection.
func TestAuthBeforeSlowBody(t *testing.T) {
	e := newEnv(t, backends[0].open(t), api.Options{})
	bad := api.NewSecret(api.KeyPrefix)
	tests := []struct {
		name, head, body string
	}{
		{"chunked, never ends", "Transfer-Encoding: chunked\r\n", "5\r\n{\"nam\r\n"},
		{"short of its length", "Content-Length: 1000\r\n", `{"name":`},
		{"malformed, short", "Content-Length: 100\r\n", `{{{{`},
		{"unknown key, chunked", "Authorization: Bearer " + bad + "\r\nTransfer-Encoding: chunked\r\n", "3\r\nabc\r\n"},
		{"not bearer, short", "Authorization: Basic eDp5\r\nContent-Length: 200000\r\n", `[`},
		{"expects 100-continue", "Content-Length: 1048576\r\nExpect: 100-continue\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n%s\r\n%s", tt.head, tt.body)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer while the body is pending: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != 401 {
				t.Fatalf("got %d, want 401", res.StatusCode)
			}
			if !res.Close {
				t.Fatal("the connection stays open, with an unread body on it")
			}
		})
	}
}
