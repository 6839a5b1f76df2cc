package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/ssh"

	"froog.tech/froog/store"
)

// ErrNotRunning: the sandbox is not running, so there is nothing to dial.
var ErrNotRunning = errors.New("sandbox is not running")

// ErrPortClosed: the sandbox runs, and nothing inside it accepts
// connections on the port (its SSH server refused the channel).
var ErrPortClosed = errors.New("nothing accepts connections on the port")

// Sandboxes is what the tunnel reads: a sandbox's state and SSH endpoint.
type Sandboxes interface {
	SandboxByID(ctx context.Context, id string) (store.Sandbox, error)
}

// Options configure a Tunnel. Zero values are documented per field.
type Options struct {
	Sandboxes Sandboxes  // required
	Signer    ssh.Signer // the control plane's key; required
	// User to log in as; "" means "user".
	User string
	// HandshakeTimeout bounds TCP connect plus the whole SSH handshake;
	// 0 means 10 s.
	HandshakeTimeout time.Duration
	// KeepAlive is how often a keepalive@openssh.com is sent; a connection
	// that does not answer within the same time is closed. 0 means 15 s.
	KeepAlive time.Duration
	// Registerer gets the tunnel's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger // nil discards
}

// Tunnel dials sandboxes.
type Tunnel struct {
	o Options
	m metrics

	mu      sync.Mutex
	conns   map[string]*client
	dialing map[string]*dialCall
	backoff map[string]backoff
	closed  bool
}

type client struct {
	*ssh.Client
	conn    *batchConn
	host    string
	port    int
	hostKey string
}

type dialCall struct {
	done chan struct{}
	c    *client
	err  error
}

type backoff struct {
	until time.Time
	n     int
}

// New checks the options; it starts nothing.
func New(o Options) (*Tunnel, error) {
	var errs []error
	if o.Sandboxes == nil {
		errs = append(errs, errors.New("tunnel: sandboxes are required"))
	}
	if o.Signer == nil {
		errs = append(errs, errors.New("tunnel: the control plane's key is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.User == "" {
		o.User = "user"
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Tunnel{o: o, m: newMetrics(o.Registerer), conns: map[string]*client{}, dialing: map[string]*dialCall{}, backoff: map[string]backoff{}}
	return t, nil
}

// DialContext opens a connection to 127.0.0.1:port inside the sandbox.
func (t *Tunnel) DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	c, err := t.client(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	nc, err := openDirect(ctx, c.Client, port)
	var oe *ssh.OpenChannelError
	if errors.As(err, &oe) && oe.Reason == ssh.ConnectionFailed {
		return nil, fmt.Errorf("dial sandbox %s port %d: %w: %w", sandboxID, port, ErrPortClosed, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dial sandbox %s port %d: %w", sandboxID, port, err)
	}
	t.m.channels.Inc()
	return newDeadlineConn(nc, t.m.channels.Dec, c.conn.ended.Load), nil
}

// Session opens an exec session in the sandbox. The caller closes it.
func (t *Tunnel) Session(ctx context.Context, sandboxID string) (*ssh.Session, error) {
	c, err := t.client(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	s, err := c.NewSession()
	if err != nil {
		return nil, fmt.Errorf("open session in sandbox %s: %w", sandboxID, err)
	}
	return s, nil
}

// Drop closes the sandbox's connection, if there is one.
func (t *Tunnel) Drop(sandboxID string) {
	t.mu.Lock()
	c := t.conns[sandboxID]
	delete(t.conns, sandboxID)
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Close closes every connection; later dials fail.
func (t *Tunnel) Close() error {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = map[string]*client{}
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}

// client returns the sandbox's connection, dialling it if needed; one dial
// at a time per sandbox, the others wait for it.
func (t *Tunnel) client(ctx context.Context, id string) (*client, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, errors.New("tunnel is closed")
		}
		if c := t.conns[id]; c != nil {
			t.mu.Unlock()
			return c, nil
		}
		call := t.dialing[id]
		if call == nil {
			call = &dialCall{done: make(chan struct{})}
			t.dialing[id] = call
			wait := time.Until(t.backoff[id].until)
			t.mu.Unlock()
			call.c, call.err = t.dial(ctx, id, wait)
			t.mu.Lock()
			delete(t.dialing, id)
			if call.err == nil {
				t.conns[id] = call.c
				delete(t.backoff, id)
			} else if !errors.Is(call.err, ErrNotRunning) && !errors.Is(call.err, context.Canceled) {
				b := t.backoff[id]
				b.n++
				b.until = time.Now().Add(min(50*time.Millisecond<<min(b.n, 7), 5*time.Second))
				t.backoff[id] = b
			}
			t.mu.Unlock()
			close(call.done)
			return call.c, call.err
		}
		t.mu.Unlock()
		select {
		case <-call.done:
			if call.err == nil {
				return call.c, nil
			}
			if ctx.Err() == nil && errors.Is(call.err, context.Canceled) {
				continue // the dialer gave up, not us: dial again
			}
			return nil, call.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// dial connects to the sandbox's SSH server after waiting out a backoff.
func (t *Tunnel) dial(ctx context.Context, id string, wait time.Duration) (*client, error) {
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	start := time.Now()
	sb, err := t.o.Sandboxes.SandboxByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("dial sandbox %s: %w", id, err)
	}
	if sb.State != store.StateRunning || sb.SSHPort == 0 {
		t.m.dialErrors.WithLabelValues("not_running").Inc()
		return nil, fmt.Errorf("dial sandbox %s: %w", id, ErrNotRunning)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(sb.SSHHostKey))
	if err != nil {
		t.m.dialErrors.WithLabelValues("host_key").Inc()
		return nil, fmt.Errorf("dial sandbox %s: pinned host key: %w", id, err)
	}
	addr := net.JoinHostPort(sb.SSHHost, strconv.Itoa(sb.SSHPort))
	dctx, cancel := context.WithTimeout(ctx, t.o.HandshakeTimeout)
	defer cancel()
	sc, bc, err := dialSSH(dctx, addr, t.o.User, t.o.Signer, key)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			t.m.dialErrors.WithLabelValues("network").Inc()
			return nil, fmt.Errorf("dial sandbox %s at %s: %w", id, addr, err)
		}
		kind := "handshake"
		var ke *ssh.ServerAuthError
		if errors.As(err, &ke) {
			kind = "auth"
		} else if errors.Is(err, ErrHostKeyMismatch) {
			kind = "host_key"
		}
		t.m.dialErrors.WithLabelValues(kind).Inc()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ssh handshake with sandbox %s: %w", id, err)
	}
	c := &client{Client: sc, conn: bc, host: sb.SSHHost, port: sb.SSHPort, hostKey: sb.SSHHostKey}
	t.m.dialSeconds.Observe(time.Since(start).Seconds())
	t.m.conns.Inc()
	go t.keepAlive(id, c)
	return c, nil
}

// keepAlive pings the connection and closes it when it stops answering;
// when it ends, for whatever reason, it is forgotten.
func (t *Tunnel) keepAlive(id string, c *client) {
	done := make(chan struct{})
	go func() {
		c.Wait()
		close(done)
	}()
	tick := time.NewTicker(t.o.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-done:
			t.mu.Lock()
			if t.conns[id] == c {
				delete(t.conns, id)
			}
			t.mu.Unlock()
			t.m.conns.Dec()
			return
		case <-tick.C:
			answered := make(chan error, 1)
			go func() {
				_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
				answered <- err
			}()
			select {
			case err := <-answered:
				if err != nil {
					c.Close()
				}
			case <-time.After(t.o.KeepAlive):
				t.o.Logger.Warn("sandbox connection does not answer keepalives; closing", slog.String("sandbox", id))
				c.Close()
			case <-done:
			}
		}
	}
}

// Watch drops connections when their sandbox stops, goes away or moves to
// another endpoint, until ctx ends; while the feed is unavailable it keeps
// trying.
func (t *Tunnel) Watch(ctx context.Context, feed store.Feed) error {
	for ctx.Err() == nil {
		sub, err := feed.Subscribe(ctx, -1)
		if err != nil {
			// The store is away (Postgres down): the connections stay as
			// they are, and serve, until it is back. Returning would end
			// the process that serves them.
			if ctx.Err() == nil {
				t.o.Logger.Warn("tunnel: cannot follow the change feed; retrying", slog.String("error", err.Error()))
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		// Anything may have changed while we were not looking.
		t.mu.Lock()
		ids := make([]string, 0, len(t.conns))
		for id := range t.conns {
			ids = append(ids, id)
		}
		t.mu.Unlock()
		for _, id := range ids {
			t.check(ctx, id)
		}
		for {
			ch, err := sub.Next(ctx)
			if err != nil {
				break // resubscribe (or stop, when ctx ended)
			}
			if ch.Kind != store.KindSandbox {
				continue
			}
			t.mu.Lock()
			c := t.conns[ch.ID]
			t.mu.Unlock()
			if c != nil && (ch.Sandbox == nil || stale(c, ch.Sandbox)) {
				// The feed may lag behind a connection dialed from a fresh
				// read (a "starting" change read after the sandbox ran and
				// was dialed): judge by the sandbox as it is now.
				t.check(ctx, ch.ID)
			}
		}
	}
	return nil
}

func (t *Tunnel) check(ctx context.Context, id string) {
	sb, err := t.o.Sandboxes.SandboxByID(ctx, id)
	t.mu.Lock()
	c := t.conns[id]
	t.mu.Unlock()
	if c != nil && (errors.Is(err, store.ErrNotFound) || (err == nil && stale(c, &sb))) {
		t.Drop(id)
	}
}

func stale(c *client, sb *store.Sandbox) bool {
	return sb.DeletedAt != nil || sb.State != store.StateRunning || sb.SSHHost != c.host || sb.SSHPort != c.port || sb.SSHHostKey != c.hostKey
}

type metrics struct {
	conns, channels prometheus.Gauge
	dialSeconds     prometheus.Histogram
	dialErrors      *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) metrics {
	m := metrics{
		conns:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_tunnel_connections", Help: "Open SSH connections to sandboxes."}),
		channels:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_tunnel_channels", Help: "Open direct-tcpip channels."}),
		dialSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "froog_tunnel_dial_seconds", Help: "Time to connect and complete the SSH handshake.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		dialErrors:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_tunnel_dial_errors_total", Help: "Failed dials by kind."}, []string{"kind"}),
	}
	if r != nil {
		r.MustRegister(m.conns, m.channels, m.dialSeconds, m.dialErrors)
	}
	return m
}
