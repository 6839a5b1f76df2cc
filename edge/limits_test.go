package edge_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"froog.tech/froog/edge"
	"froog.tech/froog/internal/wait"
)

// A body trickled slower than the edge's minimum pace is cut (408), over
// both protocols, rather than holding a connection, a tunnel channel and
// an upstream connection for as long as its sender likes.
func TestSlowBodyCut(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	r.host("slow-1-jjjjjj", echo(t), true, "")
	paced, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.BodyIdleTimeout, o.MinBodyRate = 300*time.Millisecond, 1000 })
	host := "slow-1-jjjjjj." + domain
	for _, h2 := range []bool{false, true} {
		pr, pw := io.Pipe()
		go func() {
			defer pw.Close()
			for i := 0; i < 100; i++ {
				if _, err := pw.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond) // the trickle under test
			}
		}()
		req, _ := http.NewRequest("POST", "https://"+host+"/", pr)
		res, err := r.client(paced, h2).Do(req)
		pr.CloseWithError(io.ErrClosedPipe)
		if err != nil {
			continue // the edge cut the connection: also a cut
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 408 {
			t.Fatalf("h2=%v: a trickled body got %d %s, want 408", h2, res.StatusCode, b)
		}
	}
}

// One address may hold MaxConnsPerIP connections; the next is refused
// before TLS, and closing one makes room.
func TestConnsPerIP(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	capped, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.MaxConnsPerIP = 3 })
	dial := func() (*tls.Conn, error) {
		return tls.Dial("tcp", capped, &tls.Config{RootCAs: r.ca.Pool(), ServerName: "x." + domain})
	}
	var open []*tls.Conn
	for range 3 {
		c, err := dial()
		if err != nil {
			t.Fatalf("within the cap: %v", err)
		}
		open = append(open, c)
	}
	if c, err := dial(); err == nil {
		c.Close()
		t.Fatal("a fourth connection from one address was let in")
	}
	open[0].Close()
	wait.For(t, 5*time.Second, "room after a close", func() bool {
		c, err := dial()
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	for _, c := range open[1:] {
		c.Close()
	}
}
