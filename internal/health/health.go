package health

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Check is one readiness condition of a role: Run returns nil when it
// holds, or an error that says what is wrong (it is shown on /readyz, so
// it must never hold a secret).
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

// Options configure the handler. Zero values are documented per field.
type Options struct {
	Checks  []Check
	Metrics http.Handler // /metrics; nil: 404
	// Timeout bounds each check; 0 means 2 s. A store that does not
	// answer within it is not ready.
	Timeout time.Duration
}

// Report is /readyz's body: status "ready" or "not ready", and each
// check's "ok" or what is wrong.
type Report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// Handler serves /healthz, /readyz and /metrics.
func Handler(o Options) http.Handler {
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		write(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rep := Run(r.Context(), o.Checks, o.Timeout)
		code := http.StatusOK
		if rep.Status != "ready" {
			code = http.StatusServiceUnavailable
		}
		write(w, code, rep)
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	return mux
}

// Run runs every check at once, each bounded by timeout.
func Run(ctx context.Context, checks []Check, timeout time.Duration) Report {
	rep := Report{Status: "ready", Checks: make(map[string]string, len(checks))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			msg := "ok"
			if err := run(ctx, c); err != nil {
				msg = err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			rep.Checks[c.Name] = msg
			if msg != "ok" {
				rep.Status = "not ready"
			}
		}()
	}
	wg.Wait()
	return rep
}

// run runs c, giving up when ctx ends even if c does not.
func run(ctx context.Context, c Check) error {
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errTimeout
	}
}

type timeoutError struct{}

func (timeoutError) Error() string { return "no answer in time" }

var errTimeout error = timeoutError{}

func write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
