//go:build bench

package froog_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/crypto/ssh"
)

// fixedRate is the outcome of one constant-rate run.
type fixedRate struct {
	sent, failed   int
	elapsed        time.Duration
	p50, p99, p999 time.Duration
}

// benchClient is an HTTP/1.1 keep-alive client over TLS that reaches every
// name at addr (the bench's names resolve nowhere else).
func benchClient(roots *x509.CertPool, addr string) *http.Client {
	d := &net.Dialer{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
			return d.DialContext(ctx, n, addr)
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1
		MaxIdleConnsPerHost: 64,
		// A bounded pool, so that a stall queues requests (counted from
		// when they were due) instead of opening connections whose TLS
		// handshakes would land in the stack's CPU per request.
		MaxConnsPerHost:    64,
		DisableCompression: true,
	}
	return &http.Client{Transport: tr}
}

// benchClientFor is the client of a stack: HTTP/1.1 (benchClient) but
// for the edge's edge-h2 and edge-h3 rows, which multiplex one HTTP/2
// or HTTP/3 connection.
func benchClientFor(stack string, roots *x509.CertPool, addr string) *http.Client {
	switch stack {
	case "edge-h2":
		d := &net.Dialer{}
		return &http.Client{Transport: &http.Transport{
			DialContext:       func(ctx context.Context, n, _ string) (net.Conn, error) { return d.DialContext(ctx, n, addr) },
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true, DisableCompression: true,
		}}
	case "edge-h3":
		return &http.Client{Transport: &http3.Transport{
			TLSClientConfig:    &tls.Config{RootCAs: roots},
			DisableCompression: true,
			Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				return quic.DialAddr(ctx, addr, tc, qc)
			},
		}}
	}
	return benchClient(roots, addr)
}

// runFixedRate sends GET url at rate requests a second for d, open loop
// (wrk2's pacing): request i is due at start+i/rate whether or not earlier
// ones have answered, and its latency counts from when it was due, so a
// stall shows as the whole queue it causes (no coordinated omission).
// measure, when set, is called as the measured part begins and ends; a
// warm-up at the same rate comes first.
func runFixedRate(c *http.Client, url, cookie string, rate int, warm, d time.Duration, measure func(begin bool)) fixedRate {
	do := func(due time.Time, lat *time.Duration, failed *atomic.Int64) {
		req, _ := http.NewRequest("GET", url, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		if err != nil {
			failed.Add(1)
		}
		*lat = time.Since(due)
	}
	pace := func(lats []time.Duration, failed *atomic.Int64) {
		interval := time.Second / time.Duration(rate)
		n := len(lats)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 1024) // bounds goroutines, not the schedule
		start := time.Now()
		for i := 0; i < n; {
			now := time.Now()
			for ; i < n; i++ {
				due := start.Add(time.Duration(i) * interval)
				if due.After(now) {
					break
				}
				sem <- struct{}{}
				wg.Add(1)
				go func(i int) {
					defer func() { <-sem; wg.Done() }()
					do(due, &lats[i], failed)
				}(i)
			}
			if i < n {
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
			}
		}
		wg.Wait()
	}
	var failed atomic.Int64
	pace(make([]time.Duration, int(warm.Seconds()*float64(rate))), &failed)
	failed.Store(0)
	lats := make([]time.Duration, int(d.Seconds()*float64(rate)))
	if measure != nil {
		measure(true)
	}
	start := time.Now()
	pace(lats, &failed)
	elapsed := time.Since(start)
	if measure != nil {
		measure(false)
	}
	slices.Sort(lats)
	q := func(p float64) time.Duration { return lats[min(len(lats)-1, int(p*float64(len(lats))))] }
	return fixedRate{sent: len(lats), failed: int(failed.Load()), elapsed: elapsed, p50: q(0.5), p99: q(0.99), p999: q(0.999)}
}

// handshakes counts TLS handshakes to addr as name from conc connections
// at once for d, offering the key exchanges curves (nil: Go's default,
// X25519MLKEM768 first, as browsers now do): full ones, or with resume
// set, ones that resume a session (TLS 1.3 tickets, as a browser that
// comes back does). It fails if a resumption was offered and not taken.
// Each resumption offers the first ticket: a Go client keeps a ticket it
// used, and the connection ends without reading the next one (the
// server makes and sends it with the handshake, read or not), so that
// resumed handshakes come as fast as full ones, and the two figures are
// taken at like rates.
func handshakes(addr, name string, curves []tls.CurveID, conc int, d time.Duration, resume bool) (int, error) {
	// The server's certificate is what it costs the server; the bench
	// client need not verify it too.
	cfg := &tls.Config{ServerName: name, InsecureSkipVerify: true, CurvePreferences: curves}
	if resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
		// The first ticket, before the measure: the connections share it.
		if _, err := dialTicket(addr, cfg); err != nil {
			return 0, err
		}
	}
	var n atomic.Int64
	var firstErr atomic.Value
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				var err error
				var c *tls.Conn
				if c, err = tls.Dial("tcp", addr, cfg); err == nil {
					if resume && !c.ConnectionState().DidResume {
						err = fmt.Errorf("%s did not resume the session", name)
					}
					c.Close()
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return int(n.Load()), err
	}
	return int(n.Load()), nil
}

// dialTicket makes a TLS connection with cfg and reads until the server's
// session ticket has come (TLS 1.3 sends it after the handshake; a client
// takes it only when it reads): whether the handshake resumed a session.
func dialTicket(addr string, cfg *tls.Config) (bool, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return false, err
	}
	defer c.Close()
	// Nothing but the ticket comes: the read ends at its deadline.
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	c.Read(make([]byte, 1))
	return c.ConnectionState().DidResume, nil
}

// goSSHServer is an SSH server in the bench process for the scale figures,
// where OpenSSH's sshd would fork a process per connection: it takes the
// one client key, and answers every direct-tcpip channel as a websocket
// server that accepts the upgrade and then holds the connection idle.
type goSSHServer struct {
	Addr    string
	HostKey string // authorized_keys form
	ln      net.Listener
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []*ssh.ServerConn
}

func startGoSSH(client ssh.PublicKey, host ssh.Signer) (*goSSHServer, error) {
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) != string(client.Marshal()) {
			return nil, fmt.Errorf("unknown key")
		}
		return nil, nil
	}}
	cfg.AddHostKey(host)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &goSSHServer{Addr: ln.Addr().String(), HostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(host.PublicKey()))), ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c, cfg)
		}
	}()
	return s, nil
}

func (s *goSSHServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	s.mu.Lock()
	s.conns = append(s.conns, sc)
	s.mu.Unlock()
	go func() {
		for r := range reqs {
			if r.WantReply {
				r.Reply(r.Type == "keepalive@openssh.com", nil)
			}
		}
	}()
	for nc := range chans {
		if nc.ChannelType() != "direct-tcpip" {
			nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go ssh.DiscardRequests(creqs)
		go serveIdleWebsocket(ch)
	}
}

// serveIdleWebsocket accepts a websocket upgrade and reads until the
// connection closes.
func serveIdleWebsocket(ch ssh.Channel) {
	defer ch.Close()
	r := bufio.NewReader(ch)
	req, err := http.ReadRequest(r)
	if err != nil {
		return
	}
	h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	fmt.Fprintf(ch, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(h[:]))
	io.Copy(io.Discard, r)
}

func (s *goSSHServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
