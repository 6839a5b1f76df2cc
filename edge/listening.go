package edge

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/tunnel"
)

// "Nothing is listening on 3000 — listening: 5173, 8080." When the
// tunnel's dial to a URL's port is refused, the page (or the
// problem+json) says which ports do listen inside the sandbox, and
// whether the URL's port listens, but only on an address the tunnel does
// not dial (127.0.0.1). Only for who may know: on a private URL the
// holder of its own token (a stranger is refused before any dial, a
// viewer token's holder is someone the owner shared one port with), on
// any URL every visitor it lets in once its owner turned show_ports on.
// The read goes over the sandbox's SSH connection (package tunnel), is
// cached per sandbox for listenFresh, and never holds the answer more
// than listenWait.

// listenReader is a Dialer that can also read what listens in a sandbox
// (package tunnel's can); without one the pages say only what failed.
type listenReader interface {
	Listening(ctx context.Context, sandboxID string) ([]tunnel.Listener, error)
}

const (
	// listenWait bounds how long an answer waits for the read.
	listenWait = time.Second
	// listenFresh is how long one read serves a sandbox's answers: a
	// flood of requests to a closed port opens one session that long.
	listenFresh = 3 * time.Second
	// maxListenEntries bounds the cache; past it reads are not kept.
	maxListenEntries = 4096
	// maxListedPorts bounds the ports an answer names.
	maxListedPorts = 20
)

// refusal is a dial refused on the URL's port, with whether the request
// may be told what listens instead.
type refusal struct {
	err  error
	show bool
}

func (e *refusal) Error() string { return e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }

// refused marks a refused dial of d's request with whether it may be
// told what listens; any other error is returned as it is.
func (s *Server) refused(d *decision, err error) error {
	if err == nil || !errors.Is(err, tunnel.ErrPortClosed) {
		return err
	}
	return &refusal{err: err, show: mayShowPorts(d)}
}

// mayShowPorts: the URL's owner turned show_ports on, or the request
// came in with the private URL's own token.
func mayShowPorts(d *decision) bool {
	return d.rt.ShowPorts || !d.rt.Public && d.own
}

// listenCache holds each sandbox's last read, one read at a time per
// sandbox.
type listenCache struct {
	mu sync.Mutex
	m  map[string]*listenRead
}

type listenRead struct {
	done chan struct{} // closed once ls and err are set
	at   time.Time     // when the read ended
	ls   []tunnel.Listener
	err  error
}

// listeners gives what listens in a sandbox, from a read at most
// listenFresh old, waiting at most listenWait for one.
func (s *Server) listeners(sandboxID string) ([]tunnel.Listener, error) {
	lr, ok := s.o.Dialer.(listenReader)
	if !ok {
		return nil, errors.New("the dialer cannot read listening sockets")
	}
	c := &s.listening
	now := time.Now()
	c.mu.Lock()
	r := c.m[sandboxID]
	mine := r == nil || !r.at.IsZero() && now.Sub(r.at) >= listenFresh
	if mine {
		r = &listenRead{done: make(chan struct{})}
		c.keep(sandboxID, r, now)
	}
	c.mu.Unlock()
	if mine {
		ctx, cancel := context.WithTimeout(context.Background(), listenWait)
		ls, err := lr.Listening(ctx, sandboxID)
		cancel()
		c.mu.Lock()
		r.ls, r.err, r.at = ls, err, time.Now()
		c.mu.Unlock()
		close(r.done)
		return ls, err
	}
	select {
	case <-r.done:
		return r.ls, r.err
	case <-time.After(listenWait):
		return nil, context.DeadlineExceeded
	}
}

// keep stores r, first dropping stale reads when the cache is full; a
// cache still full keeps nothing (the read serves its own request).
func (c *listenCache) keep(id string, r *listenRead, now time.Time) {
	if c.m == nil {
		c.m = map[string]*listenRead{}
	}
	if len(c.m) >= maxListenEntries {
		for k, o := range c.m {
			if !o.at.IsZero() && now.Sub(o.at) >= listenFresh {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxListenEntries {
			return
		}
	}
	c.m[id] = r
}

// portFacts is what an answer says of what listens in the sandbox.
type portFacts struct {
	Listening []int        // ports on 0.0.0.0, ::, 127.0.0.1 or ::1, the first maxListedPorts
	More      int          // how many more there are
	Elsewhere []netip.Addr // the addresses the URL's port listens on, when none is 127.0.0.1 or 0.0.0.0
}

// factsOf sorts a sandbox's listeners into what the answer for port says.
func factsOf(ls []tunnel.Listener, port int) *portFacts {
	f := &portFacts{Listening: []int{}}
	reached := false
	for _, l := range ls {
		if l.Port == port {
			if l.Addr == netip.IPv4Unspecified() || l.Addr == netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
				reached = true // it came up since the dial
			}
			f.Elsewhere = append(f.Elsewhere, l.Addr)
		}
		if l.Addr.IsUnspecified() || l.Addr.IsLoopback() && (l.Addr.Is6() || l.Addr == netip.AddrFrom4([4]byte{127, 0, 0, 1})) {
			if n := len(f.Listening); n == 0 || f.Listening[n-1] != l.Port {
				if n < maxListedPorts {
					f.Listening = append(f.Listening, l.Port)
				} else if f.Listening[n-1] != l.Port {
					f.More++
				}
			}
		}
	}
	if reached {
		f.Elsewhere = nil
	}
	return f
}

// sentence says f in words, for the page and the problem's detail.
func (f *portFacts) sentence(port int) string {
	var b strings.Builder
	if len(f.Elsewhere) > 0 {
		as := make([]string, len(f.Elsewhere))
		for i, a := range f.Elsewhere {
			as[i] = a.String()
			if a.Is6() {
				as[i] = "[" + as[i] + "] (IPv6)"
			}
		}
		b.WriteString("Port " + itoa(port) + " listens only on " + strings.Join(as, ", ") + ": the edge reaches 127.0.0.1. Listen on localhost or 0.0.0.0. ")
	}
	if len(f.Listening) == 0 {
		b.WriteString("Nothing listens on localhost or every address inside the sandbox.")
		return b.String()
	}
	ps := make([]string, len(f.Listening))
	for i, p := range f.Listening {
		ps[i] = itoa(p)
	}
	b.WriteString("Listening: " + strings.Join(ps, ", "))
	if f.More > 0 {
		b.WriteString(" and " + itoa(f.More) + " more")
	}
	b.WriteString(".")
	return b.String()
}

// notListening is the answer to a refused dial of port, the request's
// port of rt's sandbox (its own or a path route's): what
// listens instead when the request may know and the read comes in time.
func (s *Server) notListening(rt *route.Route, port int, err error) problem {
	p := errBadGateway(port)
	p.title = "Nothing is listening on " + itoa(port)
	var rf *refusal
	if !errors.As(err, &rf) || !rf.show {
		return p
	}
	ls, lerr := s.listeners(rt.SandboxID)
	if lerr != nil {
		return p // the page says what failed, as without the list
	}
	p.ports = factsOf(slices.Clone(ls), port)
	return p
}
