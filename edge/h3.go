package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// The HTTP/3 adapter: quic-go's listener and HTTP/3 server on the UDP
// port of the HTTPS port's number, serving through ServeHTTP, the
// HTTP/2 adapter's handler, so through the one pipeline. What differs
// is here: QUIC's limits, the connection count per client address
// (shared with TCP's), 0-RTT refused, the time a request stream has to
// send its head (serveQUICConn), and a request body's presence, which
// HTTP/3 does not say in its head.

// maxStreams bounds the requests one QUIC connection may have open at
// once: 250, as net/http's HTTP/2 server's MaxConcurrentStreams.
const maxStreams = 250

// bodyProbe is how long an HTTP/3 request that usually has no body
// (settleBody) waits to learn whether one follows: net/http's own wait
// when it sends such a request upstream.
const bodyProbe = 200 * time.Millisecond

// errCrowded refuses a QUIC connection from an address that has
// Options.MaxConnsPerIP open already (TCP's and QUIC's together).
var errCrowded = errors.New("edge: too many connections from one address")

// altSvc is the Alt-Svc the TCP answers carry when the edge serves
// HTTP/3 on port (0: 443): a day, as Cloudflare's (Caddy's is 30).
func altSvc(port int) string {
	if port == 0 {
		port = 443
	}
	return `h3=":` + strconv.Itoa(port) + `"; ma=86400`
}

// ServeQUIC serves HTTP/3 on pc, a UDP socket on the HTTPS port's
// number, until ctx ends or Close. On ctx's end it drains as ServeTLS
// does: it keeps serving through the drain delay, then takes no new
// connection, and each open one refuses new requests while its own
// finish, within the drain timeout, and then closes (serveQUICConn).
// pc is the caller's to close, after.
func (s *Server) ServeQUIC(ctx context.Context, pc net.PacketConn) error {
	ctx, stop := s.withDone(ctx)
	defer stop()
	tr := &quic.Transport{Conn: pc, ConnContext: s.admitQUIC, VerifySourceAddress: s.crowded}
	defer tr.Close()
	ln, err := tr.Listen(s.quicTLSConfig(), s.quicConfig())
	if err != nil {
		return fmt.Errorf("edge: listen for QUIC on %s: %w", pc.LocalAddr(), err)
	}
	// grace ends at the drain, cut at its timeout (or Close).
	grace, drain := context.WithCancel(context.Background())
	defer drain()
	cut, cutNow := context.WithCancel(context.Background())
	defer cutNow()
	var conns sync.WaitGroup
	acceptc := make(chan error, 1)
	go func() {
		for {
			conn, err := ln.Accept(context.Background())
			if err != nil {
				if errors.Is(err, quic.ErrServerClosed) {
					err = nil
				}
				acceptc <- err
				return
			}
			conns.Go(func() { s.serveQUICConn(grace, cut, conn) })
		}
	}()
	var first error
	select {
	case <-ctx.Done():
	case first = <-acceptc: // the listener failed for good: say why
		acceptc <- nil
	}
	s.shutdown("HTTP/3", func() {
		drain()    // first: once a new connection is refused, so is a new request
		ln.Close() // handshakes under way are refused; open connections stay
		<-acceptc  // no connection is added to conns from here on
	}, func(ctx context.Context) error {
		answered := make(chan struct{})
		go func() { conns.Wait(); close(answered) }()
		select {
		case <-answered:
			return nil
		case <-ctx.Done():
			cutNow()
			<-answered
			return ctx.Err()
		}
	})
	return first
}

// serveQUICConn serves one QUIC connection's requests: quic-go's
// HTTP/3 connection (http3.RawServerConn) with the edge's own stream
// loop in place of http3.Server's, for the one bound quic-go's lacks.
// Its loop (Server.handleConn in v0.65.0) hands each request stream to
// HandleRequestStream, which reads the HEADERS frame with no deadline;
// and http3.Server.IdleTimeout stops when a stream opens. So a client
// whose PINGs keep QUIC's idle timeout away could hold 250 streams a
// connection open, sending no head or a byte of one now and then:
// what ReadHeaderTimeout ends on TCP. Here a request stream has
// ReadHeaderTimeout to send its head, the read deadline set before
// quic-go reads it and lifted by serveH3 once it is in; past it quic-go
// resets the stream (H3_REQUEST_INCOMPLETE), and the connection's other
// streams go on.
//
// The price is GOAWAY: quic-go sends it only from its own loop, on the
// control stream NewRawServerConn keeps to itself. From grace's end (the
// drain) a new request is refused with H3_REQUEST_REJECTED, which tells
// the client it was not processed and may be sent again elsewhere (RFC
// 9114 §4.1.1), as GOAWAY would; the connection closes (H3_NO_ERROR)
// once its requests are answered, or at cut.
func (s *Server) serveQUICConn(grace, cut context.Context, conn *quic.Conn) {
	streams := &h3Streams{m: map[quic.StreamID]*quic.Stream{}}
	hc, err := s.newH3Server(streams).NewRawServerConn(conn)
	if err != nil { // its control stream could not be opened
		conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeInternalError), "")
		return
	}
	go func() { // the client's control and QPACK streams
		for {
			str, err := conn.AcceptUniStream(conn.Context())
			if err != nil {
				return
			}
			go hc.HandleUnidirectionalStream(str)
		}
	}()
	var reqs sync.WaitGroup
	defer reqs.Wait()
	for {
		str, err := conn.AcceptStream(grace)
		if err != nil {
			break
		}
		str.SetReadDeadline(time.Now().Add(s.o.ReadHeaderTimeout))
		streams.put(str)
		reqs.Go(func() {
			hc.HandleRequestStream(str)
			streams.drop(str.StreamID())
		})
	}
	if conn.Context().Err() != nil {
		return // the connection ended
	}
	go func() { // the drain: no new request
		for {
			str, err := conn.AcceptStream(conn.Context())
			if err != nil {
				return
			}
			str.ReleaseStreamCredit()
			str.CancelRead(quic.StreamErrorCode(http3.ErrCodeRequestRejected))
			str.CancelWrite(quic.StreamErrorCode(http3.ErrCodeRequestRejected))
		}
	}()
	answered := make(chan struct{})
	go func() { reqs.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-cut.Done():
	}
	// The last answer's last bytes may not have reached the client yet,
	// and a close drops what is unacknowledged (quic-go's client drops
	// even what it received and was not read yet); quic-go does not say
	// when data is acknowledged, so the close waits a second, or three
	// probe timeouts (RFC 9002 §6.2: the time after which a sender
	// retransmits) on a slow path, or for the client's own close.
	linger := time.NewTimer(max(time.Second, 3*probeTimeout(conn.ConnectionStats())))
	defer linger.Stop()
	select {
	case <-linger.C:
	case <-conn.Context().Done():
	case <-cut.Done():
	}
	conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
}

// quicLog takes quic-go's HTTP/3 log lines: its debug lines quote
// the request's target, which may hold a token; no logger would send a
// handler's panic to slog's default.
var quicLog = slog.New(slog.DiscardHandler)

// newH3Server is the HTTP/3 server of one QUIC connection, whose
// requests' contexts carry its request streams (streamOf).
func (s *Server) newH3Server(streams *h3Streams) *http3.Server {
	return &http3.Server{
		Handler:        http.HandlerFunc(s.serveH3),
		MaxHeaderBytes: maxHeader,
		IdleTimeout:    s.o.IdleTimeout, // with no request open; QUIC's own idle timeout is quicConfig's
		Logger:         quicLog,
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			return context.WithValue(ctx, h3StreamsKey{}, streams)
		},
	}
}

// h3Streams are one QUIC connection's request streams being served, by
// id: what quic-go's request does not give its handler.
type h3Streams struct {
	mu sync.Mutex
	m  map[quic.StreamID]*quic.Stream
}

type h3StreamsKey struct{}

func (ss *h3Streams) put(str *quic.Stream) {
	ss.mu.Lock()
	ss.m[str.StreamID()] = str
	ss.mu.Unlock()
}

func (ss *h3Streams) drop(id quic.StreamID) {
	ss.mu.Lock()
	delete(ss.m, id)
	ss.mu.Unlock()
}

// streamOf is the QUIC stream of an HTTP/3 request, or nil.
func streamOf(r *http.Request) *quic.Stream {
	ss, _ := r.Context().Value(h3StreamsKey{}).(*h3Streams)
	b, ok := r.Body.(interface{ StreamID() quic.StreamID })
	if ss == nil || !ok {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[b.StreamID()]
}

// probeTimeout is a connection's probe timeout (RFC 9002 §6.2.1) from
// its RTT estimates, with the default max_ack_delay (25 ms).
func probeTimeout(st quic.ConnectionStats) time.Duration {
	return st.SmoothedRTT + max(4*st.MeanDeviation, time.Millisecond) + 25*time.Millisecond
}

// quicTLSConfig is the TLS of the QUIC listener: tlsConfig's (its
// certificates, on-demand issuance included), with ALPN h3 alone
// (http3.ConfigureTLSConfig; acme-tls/1 is TCP's) and TLS 1.3, QUIC's
// only.
func (s *Server) quicTLSConfig() *tls.Config {
	c := http3.ConfigureTLSConfig(s.tlsConfig())
	c.MinVersion = tls.VersionTLS13
	return c
}

// quicConfig is QUIC's own: the handshake bounded as TCP's TLS handshake
// is (ReadHeaderTimeout), a connection with no packet closed after the
// keep-alive idle time (the client's own, if shorter, wins), HTTP/2's
// stream limit, and no 0-RTT: early data can be replayed by anyone who
// saw it, and the pipeline would act on a replayed POST as on the
// first. (Listen, not ListenEarly, also never accepts it.)
func (s *Server) quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout: s.o.ReadHeaderTimeout,
		MaxIdleTimeout:       s.o.IdleTimeout,
		MaxIncomingStreams:   maxStreams,
		Allow0RTT:            false,
	}
}

// admitQUIC counts a new QUIC connection against its client address, in
// the count TCP's connections share, before its handshake; past
// MaxConnsPerIP it is refused (CONNECTION_REFUSED). The count drops when
// the connection ends, or its handshake fails.
func (s *Server) admitQUIC(ctx context.Context, ci *quic.ClientInfo) (context.Context, error) {
	ip, ok := addrIP(ci.RemoteAddr)
	if !ok {
		return ctx, nil
	}
	if !s.conns.enter(ip, s.o.MaxConnsPerIP) {
		return nil, errCrowded
	}
	context.AfterFunc(ctx, func() { s.conns.leave(ip) })
	return ctx, nil
}

// crowded asks a client for proof of its address (QUIC's Retry, one
// round trip) once the address holds half its connections: a UDP
// source can be forged, and forged Initials could otherwise spend a
// real client's count.
func (s *Server) crowded(a net.Addr) bool {
	ip, ok := addrIP(a)
	return ok && s.conns.open(ip) >= max(s.o.MaxConnsPerIP/2, 1)
}

// serveH3 serves one HTTP/3 request: a view host's (by SNI, as on TCP)
// to the views' server, any other through ServeHTTP.
func (s *Server) serveH3(w http.ResponseWriter, r *http.Request) {
	str := streamOf(r)
	if str != nil { // the head is in: serveQUICConn's deadline for it is lifted
		str.SetReadDeadline(time.Time{})
	}
	if r.TLS != nil && s.isView(r.TLS.ServerName) {
		s.serveView(w, r)
		return
	}
	settleBody(r, str)
	s.ServeHTTP(w, r)
}

// settleBody makes an HTTP/3 request say whether it has a body, as an
// HTTP/2 request's head does (END_STREAM): without Content-Length,
// quic-go gives -1 whether or not one follows. For a method that
// usually has none (GET, HEAD, OPTIONS, DELETE) it peeks at the stream
// past the head (str), waiting up to bodyProbe: the stream's end means
// none (ContentLength 0), which a CORS preflight needs to be let
// through without the token (isPreflight); anything else is a body,
// left as it is, for nothing was read. A browser sends a bodiless
// request's end with its head, so the peek answers at once, with no
// goroutine or timer (quic-go starts a timer only when it must wait).
func settleBody(r *http.Request, str *quic.Stream) {
	if r.ContentLength != -1 || r.Body == nil || r.Body == http.NoBody || str == nil || !usuallyBodiless(r.Method) {
		return
	}
	str.SetReadDeadline(time.Now().Add(bodyProbe))
	n, err := str.Peek(make([]byte, 1))
	str.SetReadDeadline(time.Time{})
	if n == 0 && err == io.EOF {
		r.Body, r.ContentLength = http.NoBody, 0
	}
}

func usuallyBodiless(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete:
		return true
	}
	return false
}
