package edge_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/edge"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"github.com/prometheus/client_golang/prometheus"
)

// A client that goes away while its request is held costs nothing: the
// hold ends with it, over both protocols, and no goroutine is left.
func TestHeldClientGoes(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	r.host("gone-1-mmmmmm", echo(t), true, "")
	if _, err := r.st.UpdateSandbox(ctx, r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.State, s.DesiredState, s.AutoStart = store.StateStopped, store.StateStopped, true
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	r.tun.Drop(r.sb.ID)
	reg := prometheus.NewRegistry()
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.HoldTimeout, o.Registerer = time.Minute, reg })
	held := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "froog_edge_requests_held" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	for _, h2 := range []bool{false, true} {
		c := r.client(addr, h2)
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(cctx, "GET", "https://gone-1-mmmmmm."+domain+"/", nil)
				if res, err := c.Do(req); err == nil {
					res.Body.Close()
				}
			}()
		}
		if !wait.Until(30*time.Second, func() bool { return held() == 10 }) {
			t.Fatalf("h2=%v: %v requests held, want 10", h2, held())
		}
		cancel()
		wg.Wait()
		c.CloseIdleConnections()
		wait.For(t, 10*time.Second, fmt.Sprintf("h2=%v: the holds end with their clients", h2), func() bool { return held() == 0 })
	}
	// No goroutine of the hold's is left (fasthttp keeps idle workers for
	// a while, and the servers their idle connections: not ours to count).
	wait.For(t, 10*time.Second, "no goroutine of a hold left behind", func() bool {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(stacks, "edge.(*Server).hold") && !strings.Contains(stacks, "edge.(*framingConn).alive") &&
			!strings.Contains(stacks, "wake.(*Waker)")
	})
}
