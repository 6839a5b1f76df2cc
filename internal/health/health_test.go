package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestReadyz(t *testing.T) {
	ok := Check{Name: "store", Run: func(context.Context) error { return nil }}
	bad := Check{Name: "routes", Run: func(context.Context) error { return errors.New("the route table does not follow the store") }}
	hung := Check{Name: "certs", Run: func(ctx context.Context) error { <-ctx.Done(); time.Sleep(time.Second); return ctx.Err() }}
	tests := []struct {
		name   string
		checks []Check
		code   int
		want   map[string]string
	}{
		{"none", nil, 200, map[string]string{}},
		{"all pass", []Check{ok}, 200, map[string]string{"store": "ok"}},
		{"one fails", []Check{ok, bad}, 503, map[string]string{"store": "ok", "routes": "the route table does not follow the store"}},
		{"one hangs", []Check{ok, hung}, 503, map[string]string{"store": "ok", "certs": "no answer in time"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Handler(Options{Checks: tt.checks, Timeout: 50 * time.Millisecond})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			var rep Report
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if rec.Code != tt.code || len(rep.Checks) != len(tt.want) {
				t.Fatalf("got %d %+v, want %d %v", rec.Code, rep, tt.code, tt.want)
			}
			for k, v := range tt.want {
				if rep.Checks[k] != v {
					t.Errorf("check %s: got %q, want %q", k, rep.Checks[k], v)
				}
			}
			if wantStatus := map[int]string{200: "ready", 503: "not ready"}[tt.code]; rep.Status != wantStatus {
				t.Errorf("status %q, want %q", rep.Status, wantStatus)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("m 1\n")) })
	tests := []struct {
		method, path string
		metrics      http.Handler
		code         int
	}{
		{"GET", "/healthz", nil, 200},
		{"GET", "/readyz", nil, 200},
		{"GET", "/metrics", metrics, 200},
		{"GET", "/metrics", nil, 404},
		{"POST", "/healthz", nil, 405},
		{"GET", "/", nil, 404},
		{"GET", "/healthz/../readyz", nil, 307},
	}
	for _, tt := range tests {
		h := Handler(Options{Metrics: tt.metrics})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.code {
			t.Errorf("%s %s: got %d, want %d", tt.method, tt.path, rec.Code, tt.code)
		}
	}
}
