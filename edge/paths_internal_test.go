package edge

import (
	"testing"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// The port is chosen at decide, from the path as the protocol gives it.
func TestDecidePathRoute(t *testing.T) {
	t.Parallel()
	s, rts, _ := newFakeEdge(t, okApp)
	rts.mu.Lock()
	rts.routes["pub.froog.test"] = route.NewRoute(&store.URL{ID: "u2", AccountID: "a1", Hostname: "pub", SandboxID: "sb1", Port: 8080, Public: true,
		Routes: []store.PathRoute{{Prefix: "/api/", Port: 8000}}}, nil, time.Now())
	rts.mu.Unlock()
	for path, want := range map[string]int{"/": 8080, "/api/": 8000, "/api/x": 8000, "/api/../x": 8080, "/api": 8080, "*": 8080} {
		c := &call{host: "pub.froog.test", method: "GET", path: path, ip: mustAddr("192.0.2.1")}
		if path == "*" {
			c.method = "OPTIONS"
		}
		if d := s.decide(c); d.problem != nil || d.port != want {
			t.Errorf("decide %s: port %d (%v), want %d", path, d.port, d.problem, want)
		}
	}
}
