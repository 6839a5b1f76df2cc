package desktop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/desktop/rfb"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

const (
	acctA = "acct_000000000000000a"
	acctB = "acct_000000000000000b"
)

// fakeAccounts is an in-memory Accounts.
type fakeAccounts struct {
	mu      sync.Mutex
	m       map[string][]WallSandbox // by account
	changed store.Signal
}

func (f *fakeAccounts) set(account string, sbs ...WallSandbox) {
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string][]WallSandbox{}
	}
	f.m[account] = sbs
	f.mu.Unlock()
	f.changed.Wake()
}

func (f *fakeAccounts) Changed() <-chan struct{} { return f.changed.Changed() }

func (f *fakeAccounts) Running(account string) []WallSandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.m[account])
}

// fakePortStarter gives each sandbox's desktop its own loopback port.
type fakePortStarter struct {
	mu    sync.Mutex
	ports map[string]int
	calls int
}

func (p *fakePortStarter) set(id string, port int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ports == nil {
		p.ports = map[string]int{}
	}
	p.ports[id] = port
}

func (p *fakePortStarter) StartDesktop(_ context.Context, id, kind, _ string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if kind != names.ViewDesktop {
		return 0, fmt.Errorf("kind %s", kind)
	}
	port, ok := p.ports[id]
	if !ok {
		return 0, errors.New("no such desktop")
	}
	return port, nil
}

// fakeLinker mints links by calling mint.
// req, when set, sees every request whole.
type fakeLinker struct {
	mint func(account, sandbox string, viewOnly bool) (string, error)
	req  func(LinkRequest)
}

func (f fakeLinker) DesktopLink(_ context.Context, r LinkRequest) (string, error) {
	if f.req != nil {
		f.req(r)
	}
	return f.mint(r.AccountID, r.SandboxID, r.ViewOnly)
}

// linkerFunc is a Linker of a function.
type linkerFunc func(context.Context, LinkRequest) (string, error)

func (f linkerFunc) DesktopLink(ctx context.Context, r LinkRequest) (string, error) { return f(ctx, r) }

// wallHarness is a Server for walls (and desktops) behind an httptest
// TLS server that reads the view from the Host, as the edge does.
type wallHarness struct {
	t        *testing.T
	srv      *Server
	ts       *httptest.Server
	links    *fakeLinks
	sbs      *fakeSandboxes
	accounts *fakeAccounts
	starter  *fakePortStarter
	logs     *syncbuf.Buffer
	linker   fakeLinker
}

func newWallHarness(t *testing.T, o Options) *wallHarness {
	h := &wallHarness{t: t, links: &fakeLinks{}, sbs: &fakeSandboxes{}, accounts: &fakeAccounts{}, starter: &fakePortStarter{}, logs: &syncbuf.Buffer{}}
	o.Links, o.Starter, o.Dialer, o.Sandboxes, o.Accounts = h.links, h.starter, fakeLoopbackDialer{}, h.sbs, h.accounts
	o.Key, o.Domain, o.Log = testKey, "froog.test", slog.New(slog.NewJSONHandler(h.logs, nil))
	o.Linker = linkerFunc(func(ctx context.Context, r LinkRequest) (string, error) { return h.linker.DesktopLink(ctx, r) })
	if o.TileGrace == 0 {
		o.TileGrace = 300 * time.Millisecond
	}
	o.WallPoll = cmpOr(o.WallPoll, 100*time.Millisecond)
	o.TileEvery = cmpOr(o.TileEvery, 200*time.Millisecond)
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	h.ts = httptest.NewTLSServer(srv)
	h.linker.mint = func(a, s string, v bool) (string, error) { return "https://desktop--x.froog.test/#dt_x", nil }
	t.Cleanup(func() {
		h.ts.CloseClientConnections()
		h.ts.Close()
		srv.Close()
	})
	return h
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// wallHost is the wall's host of an account, on the test server's port.
func (h *wallHarness) host(kind, id string) string {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(h.ts.URL, "https://"))
	return names.ViewLabel(kind, id) + ".froog.test:" + port
}

// do makes a request to a view host through the test server.
func (h *wallHarness) do(method, host, path string, body io.Reader, cookie *http.Cookie, hdr map[string]string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.ts.URL+path, body)
	req.Host = host
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// wallLink adds a wall link for account and returns its token.
func (h *wallHarness) wallLink(account string, expires time.Time) string {
	tok := "dt_" + strings.Repeat("w", 20) + fmt.Sprint(time.Now().UnixNano())
	h.links.add(tok, Link{AccountID: account, Kind: names.ViewWall, ExpiresAt: expires})
	return tok
}

// session exchanges a token on account's wall host.
func (h *wallHarness) session(account, token string) (*http.Response, *http.Cookie) {
	h.t.Helper()
	host := h.host(names.ViewWall, account)
	res := h.do("POST", host, PathSession, strings.NewReader(`{"token":"`+token+`"}`), nil, map[string]string{"Origin": "https://" + host})
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			return res, c
		}
	}
	return res, nil
}

func (h *wallHarness) cookie(account string) *http.Cookie {
	h.t.Helper()
	res, c := h.session(account, h.wallLink(account, time.Now().Add(10*time.Minute)))
	if c == nil {
		h.t.Fatalf("wall session: %d", res.StatusCode)
	}
	return c
}

type sseEvent struct{ name, data string }

// events opens the wall's event stream; the events come on the channel
// until the stream ends (then it is closed). cancel ends the stream.
func (h *wallHarness) events(account string, c *http.Cookie) (<-chan sseEvent, context.CancelFunc) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.ts.URL+PathWallEvents, nil)
	req.Host = h.host(names.ViewWall, account)
	req.AddCookie(c)
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		h.t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 100)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.name != "":
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
				ev = sseEvent{}
			}
		}
	}()
	return ch, cancel
}

// waitList reads events until a "sandboxes" event whose ids are want.
func waitList(t *testing.T, ch <-chan sseEvent, timeout time.Duration, want ...string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before the sandboxes %v", want)
			}
			if ev.name != "sandboxes" {
				continue
			}
			var list []WallSandbox
			json.Unmarshal([]byte(ev.data), &list)
			var ids []string
			for _, sb := range list {
				ids = append(ids, sb.ID)
			}
			if slices.Equal(ids, want) || (len(ids) == 0 && len(want) == 0) {
				return
			}
		case <-deadline:
			t.Fatalf("after %v: no sandboxes event with %v", timeout, want)
		}
	}
}

func TestWallSession(t *testing.T) {
	h := newWallHarness(t, Options{})
	soon := time.Now().Add(10 * time.Minute)
	desktopTok := "dt_" + strings.Repeat("d", 30)
	h.links.add(desktopTok, Link{SandboxID: sbxA, Kind: names.ViewDesktop, ExpiresAt: soon})
	for _, c := range []struct {
		name, token string
		status      int
	}{
		{"ok", h.wallLink(acctA, soon), 200},
		{"another account's wall link", h.wallLink(acctB, soon), 403},
		{"expired", h.wallLink(acctA, time.Now().Add(-time.Second)), 410},
		{"a desktop link", desktopTok, 403},
		{"unknown", "dt_" + strings.Repeat("u", 30), 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, cookie := h.session(acctA, c.token)
			if res.StatusCode != c.status || (cookie != nil) != (c.status == 200) {
				t.Fatalf("got %d (cookie %v), want %d", res.StatusCode, cookie != nil, c.status)
			}
		})
	}
	// A wall session opens only its own account's wall, and a desktop
	// session no wall.
	good := h.cookie(acctA)
	forged := seal([]byte(strings.Repeat("x", 32)), session{SandboxID: acctA, Kind: names.ViewWall, Expires: time.Now().Add(time.Hour).Unix()})
	expired := seal(testKey, session{SandboxID: acctA, Kind: names.ViewWall, Expires: time.Now().Add(-time.Second).Unix()})
	desktop := seal(testKey, session{SandboxID: acctA, Kind: names.ViewDesktop, Expires: time.Now().Add(time.Hour).Unix()})
	for _, c := range []struct {
		name, account, value string
		ok                   bool
	}{
		{"good", acctA, good.Value, true},
		{"on another account's wall", acctB, good.Value, false},
		{"forged", acctA, forged, false},
		{"expired", acctA, expired, false},
		{"a desktop session", acctA, desktop, false},
	} {
		t.Run("cookie "+c.name, func(t *testing.T) {
			for _, path := range []string{PathSession, PathWallEvents, PathWallTile + sbxA + ".jpg"} {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				req, _ := http.NewRequestWithContext(ctx, "GET", h.ts.URL+path, nil)
				req.Host = h.host(names.ViewWall, c.account)
				req.AddCookie(&http.Cookie{Name: CookieName, Value: c.value})
				res, err := h.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				cancel()
				if path == PathWallTile+sbxA+".jpg" && c.ok {
					continue // no picture: nobody shows it
				}
				if (res.StatusCode == 200) != c.ok {
					t.Errorf("%s: got %d, want ok %v", path, res.StatusCode, c.ok)
				}
			}
		})
	}
}

// The wall's list follows Accounts.Changed, not its tiles' clock: with
// the tiles looked at once an hour, a start and a stop still show.
func TestWallListFollowsTheFeed(t *testing.T) {
	t.Parallel()
	h := newWallHarness(t, Options{WallPoll: time.Hour})
	h.accounts.set(acctA)
	c := h.cookie(acctA)
	ev, stop := h.events(acctA, c)
	defer stop()
	waitList(t, ev, 3*time.Second)
	h.accounts.set(acctA, WallSandbox{ID: sbxA, Name: "alpha", Since: started})
	waitList(t, ev, 3*time.Second, sbxA)
	h.accounts.set(acctA)
	waitList(t, ev, 3*time.Second)
}

// Sandboxes that start and stop show in the stream within 3 s, and two
// walls showing one desktop share one RFB connection, closed after the
// last wall goes.
func TestWallEventsAndTiles(t *testing.T) {
	green := [3]byte{0, 200, 0}
	fake := newFakeRFB(t, green)
	h := newWallHarness(t, Options{})
	h.starter.set(sbxA, fake.port())
	h.starter.set(sbxB, fake.port())
	a := WallSandbox{ID: sbxA, Name: "alpha", Since: started}
	h.accounts.set(acctA)
	c := h.cookie(acctA)

	ev1, stop1 := h.events(acctA, c)
	defer stop1()
	waitList(t, ev1, 3*time.Second)
	h.accounts.set(acctA, a)
	waitList(t, ev1, 3*time.Second, sbxA)
	ev2, stop2 := h.events(acctA, c)
	defer stop2()
	waitList(t, ev2, 3*time.Second, sbxA)

	// The picture, through a tile request.
	var pic image.Image
	wait.For(t, 5*time.Second, "a tile picture", func() bool {
		res := h.do("GET", h.host(names.ViewWall, acctA), PathWallTile+sbxA+".jpg", nil, c, nil)
		defer res.Body.Close()
		if res.StatusCode != 200 {
			return false
		}
		img, err := jpeg.Decode(res.Body)
		pic = img
		return err == nil
	})
	if b := pic.Bounds(); b.Dx() != 64 || b.Dy() != 48 {
		t.Errorf("tile %v, want 64x48 (the desktop is narrower than a tile)", b)
	}
	if got := testkit.RGBAt(pic, 32, 24); !testkit.Near(got, green) {
		t.Errorf("tile colour %v, want %v", got, green)
	}
	if acc, open := fake.conns(); acc != 1 || open != 1 {
		t.Errorf("two walls made %d connections (%d open), want 1", acc, open)
	}

	// Another account's wall never gets it.
	cb := h.cookie(acctB)
	if res := h.do("GET", h.host(names.ViewWall, acctB), PathWallTile+sbxA+".jpg", nil, cb, nil); res.StatusCode != 404 {
		t.Errorf("another account's tile: %d, want 404", res.StatusCode)
	}

	// A changed picture reaches the tile.
	blue := [3]byte{0, 0, 220}
	fake.setColour(blue)
	wait.For(t, 3*time.Second, "the tile to turn blue", func() bool {
		res := h.do("GET", h.host(names.ViewWall, acctA), PathWallTile+sbxA+".jpg", nil, c, nil)
		defer res.Body.Close()
		img, err := jpeg.Decode(res.Body)
		return err == nil && testkit.Near(testkit.RGBAt(img, 32, 24), blue)
	})

	// A second sandbox starts; the first stops.
	h.accounts.set(acctA, a, WallSandbox{ID: sbxB, Name: "beta", Since: started})
	waitList(t, ev1, 3*time.Second, sbxA, sbxB)
	h.accounts.set(acctA, WallSandbox{ID: sbxB, Name: "beta", Since: started})
	waitList(t, ev1, 3*time.Second, sbxB)
	waitList(t, ev2, 3*time.Second, sbxB)
	wait.For(t, 3*time.Second, "sbxA's tile to close", func() bool { return h.srv.tiles.get(sbxA) == nil })

	// The last wall goes: after the grace period nothing is fetched.
	stop1()
	stop2()
	wait.For(t, 5*time.Second, "every connection to close", func() bool {
		_, open := fake.conns()
		return open == 0 && h.srv.tiles.open() == 0
	})
	if acc, _ := fake.conns(); acc != 2 {
		t.Errorf("%d connections in all, want 2 (one per desktop)", acc)
	}
}

// A desktop that never answers says "no picture" and never stalls
// another's tile.
func TestWallNoPicture(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and says nothing
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	fake := newFakeRFB(t, [3]byte{200, 0, 0})
	h := newWallHarness(t, Options{NoPictureAfter: time.Second})
	h.starter.set(sbxA, ln.Addr().(*net.TCPAddr).Port)
	h.starter.set(sbxB, fake.port())
	h.accounts.set(acctA, WallSandbox{ID: sbxA, Name: "mute"}, WallSandbox{ID: sbxB, Name: "fine"})
	ev, stop := h.events(acctA, h.cookie(acctA))
	defer stop()
	states := map[string]string{}
	deadline := time.After(5 * time.Second)
	for states[sbxA] != tileNoPicture || states[sbxB] != tileOK {
		select {
		case e := <-ev:
			if e.name == "tile" {
				var te wallTileEvent
				json.Unmarshal([]byte(e.data), &te)
				states[te.ID] = te.State
			}
		case <-deadline:
			t.Fatalf("tile states %v, want %s nopicture and %s ok", states, sbxA, sbxB)
		}
	}
}

func TestWallLive(t *testing.T) {
	h := newWallHarness(t, Options{})
	h.accounts.set(acctA, WallSandbox{ID: sbxA, Name: "alpha"})
	h.accounts.set(acctB, WallSandbox{ID: sbxB, Name: "beta"})
	var got []string
	h.linker.mint = func(a, s string, v bool) (string, error) {
		got = append(got, fmt.Sprint(a, " ", s, " ", v))
		return "https://" + names.ViewLabel(names.ViewDesktop, s) + ".froog.test/#dt_abc", nil
	}
	c := h.cookie(acctA)
	host := h.host(names.ViewWall, acctA)
	live := func(body string, origin string) (int, string) {
		res := h.do("POST", host, PathWallLive, strings.NewReader(body), c, map[string]string{"Origin": origin, "Content-Type": "application/json"})
		defer res.Body.Close()
		var out struct{ URL string }
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out.URL
	}
	if st, u := live(`{"sandbox_id":"`+sbxA+`","mode":"view"}`, "https://"+host); st != 200 || u != "https://desktop--00000000000000aa.froog.test/?overlay=0&wall=1#dt_abc" {
		t.Errorf("view: %d %q", st, u)
	}
	if st, u := live(`{"sandbox_id":"`+sbxA+`","mode":"use"}`, "https://"+host); st != 200 || u != "https://desktop--00000000000000aa.froog.test/?wall=1#dt_abc" {
		t.Errorf("use: %d %q", st, u)
	}
	if st, _ := live(`{"sandbox_id":"`+sbxB+`","mode":"open"}`, "https://"+host); st != 403 {
		t.Errorf("another account's sandbox: %d, want 403", st)
	}
	if st, _ := live(`{"sandbox_id":"`+sbxA+`","mode":"use"}`, "https://evil.example"); st != 403 {
		t.Errorf("from another origin: %d, want 403", st)
	}
	if want := []string{acctA + " " + sbxA + " true", acctA + " " + sbxA + " false"}; !slices.Equal(got, want) {
		t.Errorf("links minted %q, want %q", got, want)
	}
}

// The client against the fake RFB server, through the tile machinery.
func TestTileClientFakeRFB(t *testing.T) {
	fake := newFakeRFB(t, [3]byte{10, 200, 30})
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fake.port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := rfb.NewClient(conn, 32)
	if err != nil {
		t.Fatal(err)
	}
	for up := false; !up; {
		if up, err = c.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if b := c.Pic.Bounds(); b.Dx() != 32 || b.Dy() != 24 {
		t.Errorf("tile %v, want 32x24", b)
	}
	if got := testkit.RGBAt(c.Pic, 5, 5); !testkit.Near(got, [3]byte{10, 200, 30}) {
		t.Errorf("colour %v", got)
	}
	fake.setColour([3]byte{1, 2, 3})
	conn.Write(c.Request(nil))
	for up := false; !up; {
		if up, err = c.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if got := testkit.RGBAt(c.Pic, 31, 23); !testkit.Near(got, [3]byte{1, 2, 3}) || !c.Dirty {
		t.Errorf("after a change: colour %v, dirty %v", got, c.Dirty)
	}
	if fake.shared[0] != 1 {
		t.Errorf("shared flag %d", fake.shared[0])
	}
}
