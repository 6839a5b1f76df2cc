package contract_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api/contract"
)

const sandbox = `{"id":"sbx_1","name":"e2e","state":"creating","desired_state":"running","size":"default","os":"ubuntu-24.04","labels":{},"auto_start":false,"ttl_secs":60,"auto_stop_at":null,"max_lifetime_secs":0,"stop_at":null,"delete_after_secs":0,"delete_at":null,"disk_expires_at":null,"created_at":"2026-12-02T01:26:23Z","updated_at":"2026-12-02T01:26:23Z","started_at":null,"stopped_at":null,"warm_until":null,"last_active_at":null,"env_names":[],"environment":true,"snapshots":true,"monitoring":true,"setup_status":"none","repo":null,"ipv6":null}`

const sshKey = `{"id":"key_1","name":"laptop","public_key":"ssh-ed25519 AAAA","fingerprint":"SHA256:x","created_at":"2026-12-01T10:00:00Z"}`

// TestCheck: each way an answer can break the document is caught, and an
// answer that keeps it passes (so the check can fail, and does not fail
// everything).
func TestCheck(t *testing.T) {
	t.Parallel()
	c, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	jsonH := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	errBody := `{"error":{"code":"x","message":"y","request_id":"req_1"}}`
	for _, tt := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		want               string // in the error; "" for none
	}{
		{"a documented answer", "GET", "/v1/ssh-keys", 200, jsonH(), `{"ssh_keys":[` + sshKey + "]}", ""},
		{"an undocumented field", "GET", "/v1/ssh-keys", 200, jsonH(), `{"ssh_keys":[` + strings.Replace(sshKey, `"id"`, `"secret":"s","id"`, 1) + "]}", "secret"},
		{"a required field missing", "GET", "/v1/ssh-keys", 200, jsonH(), `{"ssh_keys":[{"id":"key_1"}]}`, "missing"},
		{"a field of the wrong type", "GET", "/v1/ssh-keys", 200, jsonH(), `{"ssh_keys":[` + strings.Replace(sshKey, `"laptop"`, `7`, 1) + "]}", "name"},
		{"a sandbox, one of a oneOf", "POST", "/v1/sandboxes", 202, jsonH(), sandbox, ""},
		{"an undocumented field in one of a oneOf", "POST", "/v1/sandboxes", 202, jsonH(), strings.Replace(sandbox, `"id"`, `"pid":7,"id"`, 1), "pid"},
		{"an undocumented status", "GET", "/v1/ssh-keys", 418, jsonH(), errBody, "status 418"},
		{"an undocumented header", "GET", "/v1/ssh-keys", 200, jsonH("X-Debug", "1"), `{"ssh_keys":[]}`, "X-Debug"},
		{"a documented header", "GET", "/v1/sandboxes", 200, jsonH("X-Next-Cursor", "c"), "[]", ""},
		{"an error body that is not the error schema", "GET", "/v1/ssh-keys", 401, jsonH(), `{"message":"no"}`, "error"},
		{"a 503 sandbox_starting with its Retry-After", "POST", "/v1/sandboxes/box/exec", 503, jsonH("Retry-After", "5"), errBody, ""},
		{"a 429 with its Retry-After and limit", "POST", "/v1/sandboxes/box/exec", 429, jsonH("Retry-After", "30", "RateLimit-Limit", "4"), errBody, ""},
		{"an unknown path's 404", "GET", "/v1/nothing", 404, jsonH(), errBody, ""},
		{"an unknown path answered", "GET", "/v1/nothing", 200, jsonH(), `{}`, "no such path"},
		{"a 405 with its Allow", "PUT", "/v1/sandboxes", 405, jsonH("Allow", "GET, POST"), errBody, ""},
		{"a 405 without Allow", "PUT", "/v1/sandboxes", 405, jsonH(), errBody, "Allow"},
		{"a 405 with a wrong Allow", "PUT", "/v1/sandboxes", 405, jsonH("Allow", "GET"), errBody, "Allow"},
		{"an NDJSON stream", "POST", "/v1/sandboxes/box/exec", 200, http.Header{"Content-Type": {"application/x-ndjson"}, "X-Request-Id": {"r"}},
			`{"type":"started","command_id":"cmd_1"}` + "\n" + `{"type":"exit","exit_code":0,"timed_out":false}` + "\n", ""},
		{"an NDJSON line with an undocumented field", "POST", "/v1/sandboxes/box/exec", 200, http.Header{"Content-Type": {"application/x-ndjson"}, "X-Request-Id": {"r"}},
			`{"type":"started","command_id":"cmd_1","pid":7}` + "\n", "pid"},
		{"a file's bytes", "GET", "/v1/sandboxes/box/files/content", 200, http.Header{"Content-Type": {"application/octet-stream"}, "Content-Disposition": {"attachment"}}, "\x00\x01", ""},
		{"a file as text, undocumented", "GET", "/v1/sandboxes/box/files/content", 200, http.Header{"Content-Type": {"text/plain"}}, "hi", "text/plain"},
		{"bytes where JSON is documented", "GET", "/v1/limits", 200, http.Header{"Content-Type": {"application/octet-stream"}}, "\x00", "application/octet-stream"},
		{"outside /v1", "GET", "/healthz", 200, http.Header{}, "anything", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "http://api.test"+tt.path, nil)
			err := c.Check(req, tt.status, tt.header, []byte(tt.body))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want != "" && err == nil:
				t.Fatalf("got no error, want one about %q", tt.want)
			case tt.want != "":
				t.Log(err)
				// The reason must say it, not only the body it quotes.
				reason := err.Error()
				if tt.body != "" {
					reason, _, _ = strings.Cut(reason, tt.body[:min(len(tt.body), 20)])
				}
				if !strings.Contains(reason, tt.want) {
					t.Fatalf("got %v, want one about %q", reason, tt.want)
				}
			}
		})
	}
}

// TestCheckSaysNoSecret: the body in a contract error has its secrets
// cut, as every error message of froog.
func TestCheckSaysNoSecret(t *testing.T) {
	t.Parallel()
	c, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"froog_abcdefgh12345678", "pt_abcdefgh12345678", "pvt_abcdefgh12345678", "dt_abcdefgh12345678", "ft_abcdefgh12345678"}
	body := `{"leak":"` + strings.Join(secrets, " ") + `"}`
	req := httptest.NewRequest("GET", "http://api.test/v1/limits", nil)
	err = c.Check(req, 200, http.Header{"Content-Type": {"application/json"}}, []byte(body))
	if err == nil {
		t.Fatal("an undocumented body passed")
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows %s: %v", s, err)
		}
	}
}

// TestTransport: a broken answer fails the request where it was made and
// is kept; a stream fails its read.
func TestTransport(t *testing.T) {
	t.Parallel()
	c, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	more := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/sandboxes/box/files/content":
			w.Header().Set("Content-Type", "application/octet-stream")
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			<-more // the rest only once the client has the answer's head
			io.WriteString(w, " rest")
		case "/v1/ssh-keys":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ssh_keys":[`+sshKey+"]}")
		case "/v1/limits":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"surprise":true}`)
		case "/v1/sandboxes/box/exec":
			w.Header().Set("Content-Type", "application/x-ndjson")
			io.WriteString(w, `{"type":"started","command_id":"cmd_1"}`+"\n"+`{"type":"bogus","extra":1}`+"\n")
		}
	}))
	defer srv.Close()
	tr := &contract.Transport{Checker: c, Next: http.DefaultTransport}
	hc := &http.Client{Transport: tr}
	res, err := hc.Get(srv.URL + "/v1/ssh-keys")
	if err != nil {
		t.Fatalf("a documented answer: %v", err)
	}
	if b, _ := io.ReadAll(res.Body); !bytes.Contains(b, []byte("laptop")) {
		t.Fatalf("the body was not passed on: %s", b)
	}
	// A download passes as it comes, not read whole first.
	got := make(chan error, 1)
	go func() {
		res, err := hc.Get(srv.URL + "/v1/sandboxes/box/files/content?path=f")
		if err == nil {
			close(more)
			var b []byte
			if b, err = io.ReadAll(res.Body); err == nil && string(b) != "first rest" {
				err = fmt.Errorf("body %q", b)
			}
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a download: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(more)
		t.Fatal("a download's answer waited for its whole body")
	}
	if _, err := hc.Get(srv.URL + "/v1/limits"); err == nil || !strings.Contains(err.Error(), "contract") {
		t.Fatalf("an undocumented body: got %v, want a contract error", err)
	}
	res, err = hc.Post(srv.URL+"/v1/sandboxes/box/exec", "application/json", strings.NewReader(`{"command":"true"}`))
	if err != nil {
		t.Fatalf("a stream's head: %v", err)
	}
	if _, err := io.ReadAll(res.Body); err == nil || !strings.Contains(err.Error(), "contract") {
		t.Fatalf("a broken stream line: got %v, want a contract error", err)
	}
	if n := tr.Checked(); n != 4 {
		t.Fatalf("checked %d answers, want 4", n)
	}
	if v := tr.Violations(); len(v) != 2 {
		t.Fatalf("violations %q, want 2", v)
	}
}
