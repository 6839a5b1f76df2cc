//go:build bench

package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/edge"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/store/pg/pgtest"
)

// TestInboxBench measures the webhook inbox's accept path on Postgres
// (make bench; FROOG_BENCH=1): signed webhooks to one URL from 8 senders
// over HTTP/2, each answered 202 once stored; the p50 and p99 of the 202
// as a sender sees it, the webhooks a second, and the deliveries a second
// to the app (one at a time: arrival order). Nothing here fails on a number.
func TestInboxBench(t *testing.T) {
	t.Parallel()
	// Alone: a benchmark; other tests would share its cores and its Postgres.
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (FROOG_BENCH=1)")
	}
	st, err := pg.Open(context.Background(), pgtest.Options(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newRig(t, st)
	app := &inboxApp{}
	const secret = "bench secret"
	r.inboxURL("bench-1-iiiiii", app.start(t), "pt_bench", secret)
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Inbox, o.OpenSecret, o.RateLimit = r.st, fakeOpen, -1 })
	url := "https://bench-1-iiiiii." + domain + "/webhooks/bench"
	c := r.client(addr, true)
	body := []byte(`{"action":"opened","number":1,"repository":{"full_name":"froog/edge"}}`)
	sig := githubSig(secret, body)
	wait.For(t, 5*time.Second, "the inbox answers", func() bool {
		res, _ := post(t, c, url, body, "X-Hub-Signature-256", sig)
		return res.StatusCode == 202
	})
	const senders, each = 8, 120 // within the 1,000 a URL keeps waiting
	lat := make([]time.Duration, 0, senders*each)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range senders {
		wg.Go(func() {
			for range each {
				t0 := time.Now()
				res, _ := post(t, c, url, body, "X-Hub-Signature-256", sig)
				d := time.Since(t0)
				if res.StatusCode != http.StatusAccepted {
					t.Errorf("got %d, want 202", res.StatusCode)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	wait.For(t, 5*time.Minute, "every webhook delivered", func() bool { return len(app.seen()) >= len(lat)+1 })
	caught := time.Since(start)
	// .bench/inbox.json: make bench's report (docs/performance.md) reads it.
	b, _ := json.Marshal(map[string]any{"webhooks": len(lat), "senders": senders, "accepted_per_s": float64(len(lat)) / took.Seconds(),
		"p50_ms": ms(pct(0.5)), "p99_ms": ms(pct(0.99)), "max_ms": ms(lat[len(lat)-1]), "delivered_per_s": float64(len(lat)) / caught.Seconds()})
	if err := os.WriteFile("../.bench/inbox.json", append(b, '\n'), 0o644); err != nil {
		t.Errorf("write .bench/inbox.json: %v", err)
	}
	fmt.Printf("inbox on Postgres: %d webhooks from %d senders over HTTP/2 in %v: %.0f a second; 202 p50 %v, p99 %v, max %v; all delivered in %v: %.0f a second\n",
		len(lat), senders, took.Round(time.Millisecond), float64(len(lat))/took.Seconds(), pct(0.5).Round(10*time.Microsecond),
		pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond), caught.Round(time.Millisecond), float64(len(lat))/caught.Seconds())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
