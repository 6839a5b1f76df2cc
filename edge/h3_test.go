package edge_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"froog.tech/froog/edge"
	"froog.tech/froog/internal/wait"
)

// withH3 turns HTTP/3 on: startEdge then serves QUIC on the UDP port of
// the HTTPS listener's number.
func withH3(o *edge.Options) { o.HTTP3 = true }

// listenQUIC opens the UDP socket of an edge whose options ask for
// HTTP/3, on ln's port number, and makes that port the one its Alt-Svc
// names; nil when they do not.
func listenQUIC(t *testing.T, o *edge.Options, ln net.Listener) net.PacketConn {
	t.Helper()
	if !o.HTTP3 {
		return nil
	}
	port := ln.Addr().(*net.TCPAddr).Port
	pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen for QUIC beside the HTTPS listener: %v", err)
	}
	if o.HTTPSPort == 0 {
		o.HTTPSPort = port
	}
	return pc
}

// h3Client reaches addr (its UDP port) over HTTP/3, for every host, with
// quic-go's own client; it follows no redirect.
func (r *rig) h3Client(addr string) *http.Client {
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: r.ca.Pool()},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr, tc, qc)
		},
	}
	r.t.Cleanup(func() { tr.Close() })
	return &http.Client{Transport: tr, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// A private URL over HTTP/3 works as over TCP: the token in the query
// becomes the cookie, the cookie lets in, neither reaches the app, a
// preflight reaches it without them, a body goes through; the access
// log and the metrics say h3, and hold no token.
func TestH3PrivateURL(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	r := newRig(t, embeddedStore(t), withH3, func(o *edge.Options) { o.Registerer = reg })
	r.host("box-1-hhhhhh", echo(t), false, "pt_h3own")
	c := r.h3Client(r.addr)
	base := "https://box-1-hhhhhh." + domain
	res, b := do(t, c, "GET", base+"/")
	if res.StatusCode != 401 || res.Proto != "HTTP/3.0" || !strings.Contains(string(b), `"code":"token_required"`) {
		t.Fatalf("no token over h3: %s %d %s", res.Proto, res.StatusCode, b)
	}
	res, _ = do(t, c, "GET", base+"/p?a=1&_token=pt_h3own")
	if res.StatusCode != 302 || res.Header.Get("Location") != base+"/p?a=1" ||
		res.Header.Get("Set-Cookie") != "__Host-froog_url=pt_h3own; Path=/; Secure; HttpOnly; SameSite=None; Partitioned" {
		t.Fatalf("token in the query over h3: %d %v", res.StatusCode, res.Header)
	}
	if res.Header.Get("Alt-Svc") != "" {
		t.Fatalf("an HTTP/3 answer advertises HTTP/3: %q", res.Header.Get("Alt-Svc"))
	}
	var s seen
	res, b = do(t, c, "GET", base+"/p?a=1", "Cookie", "theme=dark; __Host-froog_url=pt_h3own")
	json.Unmarshal(b, &s)
	if res.StatusCode != 200 || s.URI != "/p?a=1" || s.Header.Get("Cookie") != "theme=dark" || s.Header.Get("X-Forwarded-Proto") != "https" {
		t.Fatalf("with the cookie over h3: %d %s", res.StatusCode, b)
	}
	if _, chunked := s.Header["Transfer-Encoding"]; chunked || s.Header.Get("Content-Length") != "" {
		t.Fatalf("a GET over h3 reached the app with a body's framing: %v", s.Header)
	}
	req, _ := http.NewRequest("POST", base+"/hook", strings.NewReader("hello over quic"))
	req.Header.Set("X-Froog-Url-Token", "pt_h3own")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	json.Unmarshal(b, &s)
	if res.StatusCode != 200 || s.Body != "hello over quic" || s.Header.Get("X-Froog-Url-Token") != "" {
		t.Fatalf("a POST with a body over h3: %d %s", res.StatusCode, b)
	}
	res, b = do(t, c, "OPTIONS", base+"/api", "Origin", "https://site.example", "Access-Control-Request-Method", "POST")
	if res.StatusCode != 200 || !strings.Contains(string(b), `"method":"OPTIONS"`) {
		t.Fatalf("a preflight over h3 did not reach the app: %d %s", res.StatusCode, b)
	}
	if res, _ := do(t, c, "GET", base+"/", "Cookie", "__Host-froog_url=pt_wrong"); res.StatusCode != 401 {
		t.Fatalf("a wrong cookie over h3: %d", res.StatusCode)
	}
	logs := r.logs.String()
	if strings.Contains(logs, "pt_h3own") || !strings.Contains(logs, `"proto":"HTTP/3.0"`) {
		t.Fatalf("the access log holds the token, or no HTTP/3 request: %s", logs)
	}
	if n := counter(reg, "froog_edge_protocol_requests_total", "h3"); n < 6 {
		t.Fatalf("froog_edge_protocol_requests_total{proto=h3} = %v, want 6 or more", n)
	}
}

// counter is the value of a counter vector's series whose one label is
// value, or -1.
func counter(reg *prometheus.Registry, name, value string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// Refusals over HTTP/3 are TCP's: a host no URL has is 404, a CONNECT
// (websockets over HTTP/3 included) 403, and a body trickled below the
// pace is cut.
func TestH3Refusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t), withH3, func(o *edge.Options) { o.BodyIdleTimeout, o.MinBodyRate = 300*time.Millisecond, 1000 })
	r.host("pub-1-hhhhhh", echo(t), true, "")
	c := r.h3Client(r.addr)
	if res, b := do(t, c, "GET", "https://nobody-1-zzzzzz."+domain+"/"); res.StatusCode != 404 || !strings.Contains(string(b), `"code":"not_found"`) {
		t.Fatalf("a host no URL has, over h3: %d %s", res.StatusCode, b)
	}
	req, _ := http.NewRequest("CONNECT", "https://pub-1-hhhhhh."+domain+"/chat", nil)
	req.Proto = "websocket" // extended CONNECT (RFC 9220)
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("extended CONNECT over h3: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Fatalf("extended CONNECT over h3: %d, want 403", res.StatusCode)
	}
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		for range 100 {
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // the trickle under test
		}
	}()
	req, _ = http.NewRequest("POST", "https://pub-1-hhhhhh."+domain+"/", pr)
	res, err = c.Do(req)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		t.Fatalf("a trickled body over h3: %v, want a 408", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 408 {
		t.Fatalf("a trickled body over h3 got %d %s, want 408", res.StatusCode, b)
	}
}

// HTTP/1.1 and HTTP/2 answers, the app's and the edge's own, name the
// edge's HTTP/3 port in Alt-Svc when it serves HTTP/3, and carry none
// when it does not; the app's own Alt-Svc never passes.
func TestH3AltSvc(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t), withH3)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Alt-Svc", `h2="elsewhere.example:443"; ma=2592000`)
		io.WriteString(w, "app")
	}))
	t.Cleanup(app.Close)
	r.host("alt-1-hhhhhh", app.Listener.Addr().(*net.TCPAddr).Port, true, "")
	off, _, _ := r.startEdge(r.st)
	_, port, _ := net.SplitHostPort(r.addr)
	want := `h3=":` + port + `"; ma=86400`
	for _, tc := range []struct {
		addr, want string
	}{{r.addr, want}, {off, ""}} {
		for _, h2 := range []bool{false, true} {
			c := r.client(tc.addr, h2)
			for _, u := range []string{"https://alt-1-hhhhhh." + domain + "/", "https://nobody-1-zzzzzz." + domain + "/"} {
				res, _ := do(t, c, "GET", u)
				if got := res.Header.Values("Alt-Svc"); strings.Join(got, ", ") != tc.want {
					t.Fatalf("%s over %s from the edge with h3=%v: Alt-Svc %q, want %q", u, res.Proto, tc.want != "", got, tc.want)
				}
			}
		}
	}
	// Over HTTP/3 itself: neither the edge's nor the app's.
	res, b := do(t, r.h3Client(r.addr), "GET", "https://alt-1-hhhhhh."+domain+"/")
	if string(b) != "app" || len(res.Header.Values("Alt-Svc")) != 0 {
		t.Fatalf("over h3: %s, Alt-Svc %q", b, res.Header.Values("Alt-Svc"))
	}
}

// The edge accepts no 0-RTT data: a client that resumes a session with
// a ticket from a first connection does so in a full round trip.
func TestH30RTTOff(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t), withH3)
	r.host("zero-1-hhhhhh", echo(t), true, "")
	tc := &tls.Config{RootCAs: r.ca.Pool(), ServerName: "zero-1-hhhhhh." + domain, NextProtos: []string{http3.NextProtoH3},
		ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	dial := func() *quic.Conn {
		qc, err := quic.DialAddrEarly(ctx, r.addr, tc, &quic.Config{})
		if err != nil {
			t.Fatalf("dial over QUIC: %v", err)
		}
		t.Cleanup(func() { qc.CloseWithError(0, "") })
		return qc
	}
	// A request on the first: the session's ticket has come by its answer.
	first := dial()
	cc := (&http3.Transport{}).NewClientConn(first)
	req, _ := http.NewRequest("GET", "https://zero-1-hhhhhh."+domain+"/", nil)
	res, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("first connection's request: %d", res.StatusCode)
	}
	first.CloseWithError(0, "")
	second := dial()
	select {
	case <-second.HandshakeComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("the second handshake never completed")
	}
	st := second.ConnectionState()
	if !st.TLS.DidResume {
		t.Fatal("the second connection did not resume the first's session: the test proves nothing")
	}
	if st.Used0RTT {
		t.Fatal("the edge accepted 0-RTT data")
	}
}

// One address's connections are counted TCP and QUIC together against
// MaxConnsPerIP: past it a QUIC connection is refused in its handshake,
// and a TCP one before TLS.
func TestH3ConnsPerIP(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t), withH3, func(o *edge.Options) { o.MaxConnsPerIP = 2 })
	tc := &tls.Config{RootCAs: r.ca.Pool(), ServerName: "x." + domain}
	qtc := &tls.Config{RootCAs: r.ca.Pool(), ServerName: "x." + domain, NextProtos: []string{http3.NextProtoH3}}
	dialQUIC := func() (*quic.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return quic.DialAddr(dctx, r.addr, qtc, &quic.Config{})
	}
	tcp, err := tls.Dial("tcp", r.addr, tc)
	if err != nil {
		t.Fatalf("a first TCP connection: %v", err)
	}
	q1, err := dialQUIC()
	if err != nil {
		t.Fatalf("a QUIC connection within the cap: %v", err)
	}
	if q, err := dialQUIC(); err == nil {
		q.CloseWithError(0, "")
		t.Fatal("a third connection (QUIC) from one address was let in")
	} else if !isRefused(err) {
		t.Fatalf("a third connection (QUIC): %v, want CONNECTION_REFUSED", err)
	}
	if c, err := tls.Dial("tcp", r.addr, tc); err == nil {
		c.Close()
		t.Fatal("a third connection (TCP) from one address was let in")
	}
	q1.CloseWithError(0, "")
	wait.For(t, 5*time.Second, "room for QUIC once a QUIC connection closed", func() bool {
		q, err := dialQUIC()
		if err == nil {
			q.CloseWithError(0, "")
		}
		return err == nil
	})
	tcp.Close()
}

// isRefused reports whether a QUIC dial failed with the server's
// CONNECTION_REFUSED.
func isRefused(err error) bool {
	var te *quic.TransportError
	return errors.As(err, &te) && te.ErrorCode == quic.ConnectionRefused
}

// On shutdown the HTTP/3 listener drains: a request in flight is
// answered, while the edge takes no new connection and refuses a new
// request on the open one (H3_REQUEST_REJECTED: not processed).
func TestH3Drain(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			return
		}
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	}))
	t.Cleanup(app.Close)
	r := newRig(t, embeddedStore(t))
	r.host("slowapp-1-hhhhhh", app.Listener.Addr().(*net.TCPAddr).Port, true, "")
	addr, _, stop := r.startEdge(r.st, withH3)
	c := r.h3Client(addr)
	u := "https://slowapp-1-hhhhhh." + domain + "/"
	wait.For(t, 5*time.Second, "the second edge has the URL", func() bool {
		res, err := c.Head(u)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode != 404
	})
	type answer struct {
		status int
		body   string
		err    error
	}
	// The slow request on a connection of its own, whose client does not
	// retry a refused request elsewhere.
	qc, err := quic.DialAddr(ctx, addr, &tls.Config{RootCAs: r.ca.Pool(), ServerName: "slowapp-1-hhhhhh." + domain,
		NextProtos: []string{http3.NextProtoH3}}, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	cc := (&http3.Transport{}).NewClientConn(qc)
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", u+path, nil)
		return cc.RoundTrip(req)
	}
	got := make(chan answer, 1)
	go func() {
		res, err := get("slow")
		if err != nil {
			got <- answer{err: err}
			return
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		got <- answer{res.StatusCode, string(b), err}
	}()
	<-arrived
	var stopped sync.WaitGroup
	stopped.Go(stop)
	qtc := &tls.Config{RootCAs: r.ca.Pool(), ServerName: "x." + domain, NextProtos: []string{http3.NextProtoH3}}
	dial := func() error {
		qc, err := quic.DialAddr(ctx, addr, qtc, &quic.Config{HandshakeIdleTimeout: 500 * time.Millisecond})
		if err == nil {
			qc.CloseWithError(0, "")
		}
		return err
	}
	wait.For(t, 10*time.Second, "the draining edge refuses new QUIC connections", func() bool { return dial() != nil })
	// A new request on the open connection is refused as not processed.
	var he *http3.Error
	if res, err := get("late"); err == nil {
		res.Body.Close()
		t.Errorf("a new request on an open connection during the drain: %d, want it refused", res.StatusCode)
	} else if !errors.As(err, &he) || he.ErrorCode != http3.ErrCodeRequestRejected {
		t.Errorf("a new request on an open connection during the drain: %v, want H3_REQUEST_REJECTED", err)
	}
	close(release)
	a := <-got
	if a.err != nil || a.status != 200 || a.body != "finished" {
		t.Fatalf("a request in flight at shutdown: %d %q %v, want 200 finished", a.status, a.body, a.err)
	}
	stopped.Wait()
	if dial() == nil {
		t.Fatal("the edge took a QUIC connection after its shutdown")
	}
}

// A request stream has ReadHeaderTimeout to send its head, as a TCP
// connection has: one that sends part of a HEADERS frame and stops, and
// one that sends frames of unknown type (which HTTP/3 skips) and never
// a head, are each reset (H3_REQUEST_INCOMPLETE) once it has passed,
// while requests on other streams of the same connection are answered,
// before the resets and after.
func TestH3HeadTimeout(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t), withH3, func(o *edge.Options) { o.ReadHeaderTimeout = time.Second })
	r.host("head-1-hhhhhh", echo(t), true, "")
	tc := &tls.Config{RootCAs: r.ca.Pool(), ServerName: "head-1-hhhhhh." + domain, NextProtos: []string{http3.NextProtoH3}}
	// Keep-alives: the connection never idles out, only the streams' heads can end them.
	qc, err := quic.DialAddr(ctx, r.addr, tc, &quic.Config{KeepAlivePeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("dial over QUIC: %v", err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	cc := (&http3.Transport{}).NewClientConn(qc)
	get := func(when string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://head-1-hhhhhh."+domain+"/", nil)
		res, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatalf("a request %s: %v", when, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("a request %s: %d", when, res.StatusCode)
		}
	}
	open := func(first []byte) *quic.Stream {
		str, err := qc.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := str.Write(first); err != nil {
			t.Fatal(err)
		}
		return str
	}
	partial := open([]byte{0x01, 0x40}) // HEADERS, its length's first byte of two
	grease := open([]byte{0x21, 0x00})  // a reserved frame type, empty
	stopGrease := make(chan struct{})
	greased := make(chan struct{})
	go func() {
		defer close(greased)
		for {
			select {
			case <-stopGrease:
				return
			case <-time.After(200 * time.Millisecond): // the trickle under test
			}
			if _, err := grease.Write([]byte{0x21, 0x00}); err != nil {
				return
			}
		}
	}()
	defer func() { close(stopGrease); <-greased }()
	get("while two streams hold no head")
	for name, str := range map[string]*quic.Stream{"part of a head": partial, "frames of unknown type": grease} {
		str.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err := str.Read(make([]byte, 1))
		var se *quic.StreamError
		if !errors.As(err, &se) || se.ErrorCode != quic.StreamErrorCode(http3.ErrCodeRequestIncomplete) || !se.Remote {
			t.Fatalf("a stream that sent %s: %v, want a reset H3_REQUEST_INCOMPLETE", name, err)
		}
	}
	get("after the two were reset")
}

// An HTTP/3 GET without Content-Length whose body follows its head, at
// once or after a pause longer than the edge waits to see whether one
// does, reaches the app with its body whole; one without (the stream's
// end with its head) reaches it with none.
func TestH3BodyOfAGet(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t), withH3)
	r.host("getbody-1-hhhhhh", echo(t), true, "")
	c := r.h3Client(r.addr)
	u := "https://getbody-1-hhhhhh." + domain + "/"
	for _, pause := range []time.Duration{0, 400 * time.Millisecond} {
		pr, pw := io.Pipe()
		go func() {
			time.Sleep(pause) // a body that comes late: the case under test
			io.WriteString(pw, "a body of a get")
			pw.Close()
		}()
		req, _ := http.NewRequest("GET", u, pr) // a pipe: no Content-Length
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("a GET with a body %v after its head: %v", pause, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var s seen
		json.Unmarshal(b, &s)
		if res.StatusCode != 200 || s.Body != "a body of a get" {
			t.Fatalf("a GET with a body %v after its head: %d %s", pause, res.StatusCode, b)
		}
	}
	res, b := do(t, c, "GET", u)
	var s seen
	json.Unmarshal(b, &s)
	if _, chunked := s.Header["Transfer-Encoding"]; res.StatusCode != 200 || chunked || s.Body != "" {
		t.Fatalf("a GET without a body: %d %s", res.StatusCode, b)
	}
}
