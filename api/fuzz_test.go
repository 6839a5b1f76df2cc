package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"froog.tech/froog/api"
)

// FuzzRequests sends arbitrary requests through the whole API: every
// answer is JSON, every error has a code, and none is a 500.
func FuzzRequests(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"POST", "/v1/sandboxes", `{"name":"box","labels":{"a":"b"},"ttl_secs":60}`},
		{"POST", "/v1/sandboxes", `{"name":"box","env":{"A":"1"},"size":"large","os":"debian-13"}`},
		{"GET", "/v1/sandboxes?label=a=b&state=running,stopped&limit=2&cursor=2026-11-29T12:00:00Z_sbx_1", ""},
		{"PATCH", "/v1/sandboxes/box", `{"labels":{"a":null},"ttl_secs":0,"name":"b2"}`},
		{"POST", "/v1/sandboxes/box/urls", `{"port":3000,"subdomain":"acme-demo","title":"t"}`},
		{"POST", "/v1/sandboxes/box/urls", `{"port":3000,"allow_ips":["203.0.113.0/24","2001:db8::/32","198.51.100.7"],"rate_limit":{"per_second":10,"burst":20},"frame_ancestors":["https://app.example","'self'"]}`},
		{"POST", "/v1/sandboxes/box/urls", `{"port":3000,"allow_ips":null,"rate_limit":null,"frame_ancestors":[]}`},
		{"POST", "/v1/sandboxes/box/urls", `{"port":3000,"routes":[{"prefix":"/api/","port":8000},{"prefix":"/ws/","port":9000}]}`},
		{"PATCH", "/v1/sandboxes/box/urls/3000", `{"allow_ips":["10.0.0.0/8"],"rate_limit":{"per_second":0.5},"frame_ancestors":["'none'"]}`},
		{"PATCH", "/v1/sandboxes/box/urls/3000", `{"routes":[{"prefix":"/api/","port":8000}]}`},
		{"POST", "/v1/sandboxes/box/urls/3000/tokens", `{"ttl_secs":60,"label":"x"}`},
		{"DELETE", "/v1/sandboxes/box/urls/3000/tokens/utk_1", ""},
		{"GET", "/v1/audit?limit=1&cursor=5", ""},
		{"POST", "/v1/sandboxes/box/start", `{"size":"small"}`},
		{"GET", "/v1/stops/stop_1", ""},
		{"POST", "/v1/ssh-keys", `{"name":"me","public_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGtQUDJlZ2ZHcW9ZcVN3c2lHU3ZKZ1pQeXlkN3dG me@x"}`},
		{"DELETE", "/v1/ssh-keys/sshkey_1", ""},
		{"PUT", "/v1/env/API_KEY", `{"value":"x"}`},
		{"PATCH", "/v1/environment", `{"repos":[{"url":"https://github.com/you/app","branch":"main"}],"setup":"make"}`},
		{"PUT", "/v1/environment/files", `{"path":"app/.env","content":"QQ==","encoding":"base64"}`},
		{"DELETE", "/v1/environment/files?path=app/.env", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.body)
	}
	e := newEnv(f, backends[0].open(f), api.Options{RateLimit: 1 << 30})
	e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box"}`)
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#") || !validMethod(method) {
			return
		}
		req := httptest.NewRequest("GET", "/", strings.NewReader(body))
		req.Method = method
		req.URL.Path, req.URL.RawQuery, _ = strings.Cut(path, "?")
		req.Header.Set("Authorization", "Bearer "+e.admin)
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var b struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Error.Code == "" || b.Error.Message == "" {
				t.Fatalf("%s %s: error without a code: %d %s", method, path, w.Code, w.Body)
			}
		}
		if w.Header().Get("X-Request-Id") == "" {
			t.Fatal("no X-Request-Id")
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete, http.MethodPut:
		return true
	}
	return false
}
