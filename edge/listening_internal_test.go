package edge

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/tunnel"
)

// fakeListenDialer stands in for the tunnel where a read must block or
// be counted, which a real sandbox cannot be made to do on cue.
type fakeListenDialer struct {
	reads   atomic.Int32
	release chan struct{} // nil: answer at once
	ls      []tunnel.Listener
}

func (f *fakeListenDialer) DialContext(context.Context, string, int) (net.Conn, error) {
	return nil, tunnel.ErrPortClosed
}

func (f *fakeListenDialer) Listening(ctx context.Context, _ string) ([]tunnel.Listener, error) {
	f.reads.Add(1)
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return f.ls, nil
}

func l(addr string, port int) tunnel.Listener {
	return tunnel.Listener{Addr: netip.MustParseAddr(addr), Port: port}
}

// Concurrent answers for one sandbox share one read; a read that does
// not come gives up (listenWait) and the answer goes without it.
func TestListenersShareOneBoundedRead(t *testing.T) {
	t.Parallel()
	f := &fakeListenDialer{ls: []tunnel.Listener{l("127.0.0.1", 5173)}, release: make(chan struct{})}
	s := &Server{o: Options{Dialer: f}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if ls, err := s.listeners("sbx_1"); err != nil || len(ls) != 1 {
				t.Errorf("got %v, %v; want the one read's answer", ls, err)
			}
		})
	}
	for f.reads.Load() == 0 {
		runtime.Gosched() // the first caller is on its way to the read
	}
	close(f.release)
	wg.Wait()
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads for 8 answers; want 1", n)
	}
	if _, err := s.listeners("sbx_1"); err != nil || f.reads.Load() != 1 {
		t.Fatalf("a fresh read was not reused: %v, %d reads", err, f.reads.Load())
	}
	stuck := &fakeListenDialer{release: make(chan struct{})} // never released
	s = &Server{o: Options{Dialer: stuck}}
	if ls, err := s.listeners("sbx_2"); err == nil {
		t.Fatalf("a read that never answers: got %v", ls)
	}
	if p := s.notListening(&route.Route{SandboxID: "sbx_2", Port: 3000}, 3000, &refusal{err: tunnel.ErrPortClosed, show: true}); p.ports != nil {
		t.Fatalf("a read that never came still gave facts: %+v", p.ports)
	}
}

// What the answer says, from what listens: the ports on wildcard and
// loopback addresses, and where the URL's port listens when the tunnel
// cannot reach it.
func TestFactsOf(t *testing.T) {
	t.Parallel()
	many := []tunnel.Listener{}
	for p := 1000; p < 1025; p++ {
		many = append(many, l("0.0.0.0", p))
	}
	tests := []struct {
		name      string
		ls        []tunnel.Listener
		listening []int
		more      int
		elsewhere []string
		says      string
	}{
		{"nothing", nil, []int{}, 0, nil, "Nothing listens on localhost or every address"},
		{"other ports", []tunnel.Listener{l("0.0.0.0", 22), l("::", 22), l("127.0.0.1", 5173), l("::1", 8080), l("10.0.2.15", 9000), l("127.0.0.53", 53)},
			[]int{22, 5173, 8080}, 0, nil, "Listening: 22, 5173, 8080."},
		{"another loopback address", []tunnel.Listener{l("127.0.0.2", 3000), l("127.0.0.1", 5173)}, []int{5173}, 0, []string{"127.0.0.2"},
			"Port 3000 listens only on 127.0.0.2: the edge reaches 127.0.0.1."},
		{"IPv6 only", []tunnel.Listener{l("::", 3000)}, []int{3000}, 0, []string{"::"}, "listens only on [::] (IPv6)"},
		{"up since the dial", []tunnel.Listener{l("127.0.0.1", 3000), l("::1", 3000)}, []int{3000}, 0, nil, "Listening: 3000."},
		{"many", many, many20(), 5, nil, "1019 and 5 more."},
	}
	for _, tt := range tests {
		f := factsOf(tt.ls, 3000)
		var else_ []string
		for _, a := range f.Elsewhere {
			else_ = append(else_, a.String())
		}
		if !slices.Equal(f.Listening, tt.listening) || f.More != tt.more || !slices.Equal(else_, tt.elsewhere) || !strings.Contains(f.sentence(3000), tt.says) {
			t.Errorf("%s: got %v +%d elsewhere %v %q; want %v +%d elsewhere %v, saying %q", tt.name, f.Listening, f.More, else_, f.sentence(3000), tt.listening, tt.more, tt.elsewhere, tt.says)
		}
	}
}

func many20() []int {
	var ps []int
	for p := 1000; p < 1020; p++ {
		ps = append(ps, p)
	}
	return ps
}
