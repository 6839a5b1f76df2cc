package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/edge"
	"froog.tech/froog/store"
)

// clientFrom is client with connections from source address src (a
// second loopback address is a second client).
func (r *rig) clientFrom(addr, src string, h2 bool) *http.Client {
	c := r.client(addr, h2)
	tr := c.Transport.(*http.Transport)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return c
}

// countingApp is an app that counts the requests that reach it and
// answers with the headers given.
func countingApp(t *testing.T, hdr http.Header) (int, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		for k, vs := range hdr {
			w.Header()[k] = vs
		}
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			return
		}
		fmt.Fprint(w, "app")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port, &n
}

// policy sets the policy of the rig's URL on port.
func (r *rig) policy(port int, set func(u *store.URL)) {
	r.t.Helper()
	if _, err := r.st.PutURL(ctx, r.sb.ID, port, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		set(&u)
		return u, nil
	}, nil); err != nil {
		r.t.Fatal(err)
	}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// errorCode is the API error code of a JSON or problem+json answer.
func errorCode(b []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(b, &e)
	return e.Error.Code
}

// An allowlisted URL answers only the connections from the addresses it
// allows: 127.0.0.1 comes in, 127.0.0.2 gets 403 ip_not_allowed, whatever
// token it carries and whatever X-Forwarded-For it claims, and never
// reaches the app; a navigation gets the page. Over both protocols.
func TestPolicyAllowIPs(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	port, reached := countingApp(t, nil)
	const tok = "pt_allowlisted"
	r.host("allow-1-aaaaaa", port, false, tok)
	r.policy(port, func(u *store.URL) { u.AllowIPs = prefixes("127.0.0.1/32", "2001:db8::/32") })
	base := "https://allow-1-aaaaaa." + domain
	refused := r.clientFrom(r.addr, "127.0.0.2", false)
	eventually(t, "the allowlist reaches the edge", func() bool {
		res, _ := do(t, refused, "GET", base+"/", "X-Froog-Url-Token", tok)
		return res.StatusCode == 403
	})
	before := reached.Load()
	for _, h2 := range []bool{false, true} {
		in, out := r.clientFrom(r.addr, "127.0.0.1", h2), r.clientFrom(r.addr, "127.0.0.2", h2)
		for _, tc := range []struct {
			name   string
			target string
			hdr    []string
		}{
			{"the token in a header", "/", []string{"X-Froog-Url-Token", tok}},
			{"the token in the query (no cookie is set)", "/?_token=" + tok, nil},
			{"no token", "/", nil},
			{"a spoofed X-Forwarded-For", "/", []string{"X-Froog-Url-Token", tok, "X-Forwarded-For", "127.0.0.1", "X-Real-Ip", "127.0.0.1", "Forwarded", "for=127.0.0.1"}},
		} {
			res, b := do(t, out, "GET", base+tc.target, tc.hdr...)
			if res.StatusCode != 403 || errorCode(b) != "ip_not_allowed" || res.Header.Get("Content-Type") != "application/problem+json" || res.Header.Get("Set-Cookie") != "" {
				t.Errorf("h2=%v, %s, from 127.0.0.2: got %d %s %q, Set-Cookie %q; want 403 ip_not_allowed problem+json, no cookie",
					h2, tc.name, res.StatusCode, res.Header.Get("Content-Type"), b, res.Header.Get("Set-Cookie"))
			}
		}
		res, b := do(t, out, "GET", base+"/", "Sec-Fetch-Mode", "navigate", "Accept", "text/html")
		if res.StatusCode != 403 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(string(b), "ip_not_allowed") {
			t.Errorf("h2=%v: a refused navigation got %d %s, want the 403 page", h2, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if got := reached.Load(); got != before {
			t.Fatalf("h2=%v: %d refused requests reached the app", h2, got-before)
		}
		if res, b := do(t, in, "GET", base+"/", "X-Froog-Url-Token", tok); res.StatusCode != 200 || string(b) != "app" {
			t.Errorf("h2=%v: from 127.0.0.1: got %d %q, want 200 app", h2, res.StatusCode, b)
		}
		// The allowed address still needs the token.
		if res, b := do(t, in, "GET", base+"/"); res.StatusCode != 401 {
			t.Errorf("h2=%v: from 127.0.0.1 without the token: got %d %s, want 401", h2, res.StatusCode, b)
		}
		before = reached.Load()
	}
	// Taken off, the other address comes in again at its next request.
	r.policy(port, func(u *store.URL) { u.AllowIPs = nil })
	eventually(t, "the allowlist's removal reaches the edge", func() bool {
		res, _ := do(t, refused, "GET", base+"/", "X-Froog-Url-Token", tok)
		return res.StatusCode == 200
	})
}

// A refused request never wakes a stopped sandbox that starts on a
// visit: the policy is decided before the start is.
func TestPolicyRefusedNeverWakes(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	sb, err := r.st.CreateSandbox(ctx, store.Sandbox{AccountID: r.sb.AccountID, Name: "sleepy", DesiredState: store.StateStopped, State: store.StateStopped, AutoStart: true, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.PutURL(ctx, sb.ID, 3000, func(*store.URL, *store.AuditEvent) (store.URL, error) {
		return store.URL{Hostname: "sleepy-3000-bbbbbb", Public: true, AllowIPs: prefixes("127.0.0.1/32"), CreatedAt: time.Now(), UpdatedAt: time.Now()}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	out := r.clientFrom(r.addr, "127.0.0.2", true)
	eventually(t, "the URL reaches the edge", func() bool {
		res, _ := do(t, out, "GET", "https://sleepy-3000-bbbbbb."+domain+"/")
		return res.StatusCode == 403
	})
	for range 3 {
		do(t, out, "POST", "https://sleepy-3000-bbbbbb."+domain+"/hook")
	}
	got, err := r.st.Sandbox(ctx, sb.AccountID, sb.Name)
	if err != nil || got.DesiredState != store.StateStopped {
		t.Fatalf("after refused visits: desired state %q, %v; want it stopped", got.DesiredState, err)
	}
}

// A URL's rate limit is per client address and per URL, over both
// protocols at once: the bucket empties, the next request gets 429 with
// Retry-After, another address and another URL are not affected, and
// the bucket fills again with time (the edge's clock, held still).
func TestPolicyRateLimit(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	port, reached := countingApp(t, nil)
	r.host("limited-1-cccccc", port, true, "")
	r.policy(port, func(u *store.URL) { u.RateLimit = &store.RateLimit{PerSecond: 0.5, Burst: 3} })
	free := echo(t)
	r.host("free-1-dddddd", free, true, "")
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	limited, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Now = clock })
	base := "https://limited-1-cccccc." + domain
	before := reached.Load() // host's look through the first edge
	var codes []int
	for _, h2 := range []bool{false, true, false, true} {
		res, b := do(t, r.clientFrom(limited, "127.0.0.1", h2), "GET", base+"/")
		codes = append(codes, res.StatusCode)
		if res.StatusCode == 429 && (res.Header.Get("Retry-After") != "2" || errorCode(b) != "rate_limited") {
			t.Errorf("429: Retry-After %q, body %s; want 2 (half a request a second) and rate_limited", res.Header.Get("Retry-After"), b)
		}
	}
	if !slices.Equal(codes, []int{200, 200, 200, 429}) {
		t.Fatalf("from one address: statuses %v, want [200 200 200 429] (one bucket across protocols)", codes)
	}
	if n := reached.Load() - before; n != 3 {
		t.Errorf("the app got %d requests, want the 3 let in", n)
	}
	if res, _ := do(t, r.clientFrom(limited, "127.0.0.2", false), "GET", base+"/"); res.StatusCode != 200 {
		t.Errorf("another address: %d, want 200", res.StatusCode)
	}
	if res, _ := do(t, r.clientFrom(limited, "127.0.0.1", false), "GET", "https://free-1-dddddd."+domain+"/"); res.StatusCode != 200 {
		t.Errorf("another URL from the same address: %d, want 200", res.StatusCode)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	c := r.clientFrom(limited, "127.0.0.1", true)
	if res, _ := do(t, c, "GET", base+"/"); res.StatusCode != 200 {
		t.Errorf("2 s later: %d, want 200 (one more in the bucket)", res.StatusCode)
	}
	if res, _ := do(t, c, "GET", base+"/"); res.StatusCode != 429 {
		t.Errorf("and the next: %d, want 429", res.StatusCode)
	}
}

// frame_ancestors makes the URL's answers say who may frame them: the
// app's frame-ancestors directive and X-Frame-Options go, its other
// directives stay. Without it, the app's headers pass as they were.
func TestPolicyFrameAncestors(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	port, _ := countingApp(t, http.Header{
		"Content-Security-Policy": {"default-src 'self'; frame-ancestors 'none'", "frame-ancestors 'self'"},
		"X-Frame-Options":         {"DENY"},
	})
	r.host("framed-1-eeeeee", port, true, "")
	base := "https://framed-1-eeeeee." + domain
	for _, h2 := range []bool{false, true} {
		res, _ := do(t, r.client(r.addr, h2), "GET", base+"/")
		if got := res.Header.Values("Content-Security-Policy"); len(got) != 2 || res.Header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("h2=%v, no frame_ancestors: CSP %q, X-Frame-Options %q; want the app's", h2, got, res.Header.Get("X-Frame-Options"))
		}
	}
	r.policy(port, func(u *store.URL) { u.FrameAncestors = []string{"https://app.example", "'self'"} })
	want := []string{"default-src 'self'", "frame-ancestors https://app.example 'self'"}
	eventually(t, "frame_ancestors reaches the edge", func() bool {
		res, _ := do(t, r.client(r.addr, true), "GET", base+"/")
		return slices.Equal(res.Header.Values("Content-Security-Policy"), want)
	})
	for _, h2 := range []bool{false, true} {
		for _, path := range []string{"/", "/sse"} {
			res, b := do(t, r.client(r.addr, h2), "GET", base+path)
			if got := res.Header.Values("Content-Security-Policy"); res.StatusCode != 200 || !slices.Equal(got, want) || res.Header.Get("X-Frame-Options") != "" {
				t.Errorf("h2=%v %s: %d %q, CSP %q, X-Frame-Options %q; want CSP %q and none", h2, path, res.StatusCode, b, got, res.Header.Get("X-Frame-Options"), want)
			}
		}
	}
}

// On a dual-stack listener an IPv4 client's address is IPv4-mapped IPv6
// (::ffff:127.0.0.2): it matches the IPv4 rules, as it would on an IPv4
// listener, and the other loopback address is still refused.
func TestPolicyAllowIPsDualStack(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	port, _ := countingApp(t, nil)
	r.host("mapped-1-ffffff", port, true, "")
	r.policy(port, func(u *store.URL) { u.AllowIPs = prefixes("127.0.0.2/32") })
	r.listen = "[::]:0"
	dual, _, _ := r.startEdge(r.st)
	_, p, _ := net.SplitHostPort(dual)
	v4 := net.JoinHostPort("127.0.0.1", p)
	base := "https://mapped-1-ffffff." + domain + "/"
	for _, h2 := range []bool{false, true} {
		if res, b := do(t, r.clientFrom(v4, "127.0.0.2", h2), "GET", base); res.StatusCode != 200 {
			t.Errorf("h2=%v: 127.0.0.2 through the dual-stack listener: %d %s, want 200", h2, res.StatusCode, b)
		}
		if res, b := do(t, r.clientFrom(v4, "127.0.0.1", h2), "GET", base); res.StatusCode != 403 {
			t.Errorf("h2=%v: 127.0.0.1 through the dual-stack listener: %d %s, want 403", h2, res.StatusCode, b)
		}
		if res, b := do(t, r.clientFrom(net.JoinHostPort("::1", p), "::1", h2), "GET", base); res.StatusCode != 403 {
			t.Errorf("h2=%v: ::1: %d %s, want 403", h2, res.StatusCode, b)
		}
	}
}

// A URL's bandwidth cap slows its answers' bodies over both protocols,
// and its requests' bodies: past the bucket's quarter second, 250 kB at
// 1 Mbit/s (125 kB/s) take at least 1.75 s. Only a lower bound is
// checked: a loaded machine may be slower, never faster.
func TestPolicyBandwidth(t *testing.T) {
	t.Parallel()
	const size = 250_000
	r := newRig(t, embeddedStore(t))
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, n)
			return
		}
		w.Write(bytes.Repeat([]byte("x"), size))
	}))
	t.Cleanup(app.Close)
	port := app.Listener.Addr().(*net.TCPAddr).Port
	r.host("capped-1-eeeeee", port, true, "")
	r.policy(port, func(u *store.URL) { u.BandwidthMbit = 1 })
	addr, _, _ := r.startEdge(r.st)
	least := time.Duration(float64(size-size/8) / 125_000 * float64(time.Second)) // the bucket holds 31 250 bytes: an eighth
	for _, h2 := range []bool{false, true} {
		c := r.clientFrom(addr, "127.0.0.1", h2)
		began := time.Now()
		res, body := do(t, c, "GET", "https://capped-1-eeeeee."+domain+"/")
		if took := time.Since(began); res.StatusCode != 200 || len(body) != size || took < least {
			t.Errorf("h2=%v: a %d-byte answer at 1 Mbit/s: %d, %d bytes in %v; want all of it in %v or more", h2, size, res.StatusCode, len(body), took, least)
		}
		began = time.Now()
		req, _ := http.NewRequest("POST", "https://capped-1-eeeeee."+domain+"/", bytes.NewReader(bytes.Repeat([]byte("y"), size)))
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if took := time.Since(began); res.StatusCode != 200 || string(got) != strconv.Itoa(size) || took < least {
			t.Errorf("h2=%v: a %d-byte request body at 1 Mbit/s: %d, the app read %s in %v; want all of it in %v or more", h2, size, res.StatusCode, got, took, least)
		}
	}
}
