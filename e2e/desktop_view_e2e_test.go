package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"froog.tech/froog/internal/browser"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// The desktop's viewer in Chromium against the real binary (froogd dev,
// the local driver, froog-desktop's Xvnc and openbox on the host).

// deskEnv is a froogd dev with its edge, for the desktop's tests.
type deskEnv struct {
	c    client
	edge string // the edge's address
	pool *x509.CertPool
	web  *http.Client // reaches the edge for every host, trusting the local CA
}

// devDesktop starts froogd dev with an edge under froog.test; it skips
// where Xvnc or Chromium is missing (deploy/testdeps.sh installs them).
func devDesktop(t *testing.T) *deskEnv {
	t.Helper()
	return devDesktopWith(t, devOptions{})
}

// devDesktopWith is devDesktop with o for its froogd dev.
func devDesktopWith(t *testing.T, o devOptions) *deskEnv {
	t.Helper()
	for _, bin := range []string{"Xvnc", "chromium"} {
		if _, err := exec.LookPath(bin); err != nil {
			testdep.Missing(t, "%s is not installed (deploy/testdeps.sh installs it)", bin)
		}
	}
	d := startDev(t, o)
	return &deskEnv{c: d.c, edge: d.edge, pool: d.pool, web: d.web(false)}
}

// sandbox creates a running sandbox whose screens are stopped when the
// test ends (before froogd is).
func (e *deskEnv) sandbox(t *testing.T, name string) {
	t.Helper()
	e.c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
	runs(t, e.c, name)
	t.Cleanup(func() {
		for _, k := range []string{"desktop", "browser"} {
			e.c.call("POST", "/v1/sandboxes/"+name+"/exec", `{"command": "froog-desktop stop --kind `+k+`"}`, 200, nil)
		}
	})
}

// sh runs a command in a sandbox and returns its output; it fails the
// test when the command does.
func (e *deskEnv) sh(t *testing.T, sandbox, command string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": command})
	var r struct {
		ExitCode       int `json:"exit_code"`
		Stdout, Stderr string
	}
	e.c.call("POST", "/v1/sandboxes/"+sandbox+"/exec", string(body), 200, &r)
	if r.ExitCode != 0 {
		t.Fatalf("%s in %s: exit %d: %s", command, sandbox, r.ExitCode, r.Stderr)
	}
	return r.Stdout
}

// display starts the sandbox's screen of kind (as opening it would) and
// returns its X display.
func (e *deskEnv) display(t *testing.T, sandbox, kind string) string {
	t.Helper()
	var st struct{ Display string }
	out := e.sh(t, sandbox, "froog-desktop start --kind "+kind)
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Display == "" {
		t.Fatalf("froog-desktop start: %q", out)
	}
	return st.Display
}

// link asks the API for a view link: path is desktop, desktop?viewonly=1
// or browser.
func (e *deskEnv) link(t *testing.T, sandbox, path, body string) string {
	t.Helper()
	var l struct{ URL string }
	e.c.call("POST", "/v1/sandboxes/"+sandbox+"/"+path, body, 201, &l)
	return l.URL
}

// session exchanges a link's token on a host as the page does and
// returns the status and the session cookie ("" when refused).
func (e *deskEnv) session(t *testing.T, host, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "https://"+host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q}`, token)))
	req.Header.Set("Origin", "https://"+host)
	req.Header.Set("Content-Type", "application/json")
	res, err := e.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-froog_desktop" {
			return res.StatusCode, ck.Name + "=" + ck.Value
		}
	}
	return res.StatusCode, ""
}

// websocket opens a view host's bridge with a session cookie, as the
// page does.
func (e *deskEnv) websocket(t *testing.T, host, cookie string) *websocket.Conn {
	t.Helper()
	return e.websocketAt(t, host, "/websockify", cookie)
}

// websocketAt opens the websocket at path on a view host with a session
// cookie, as the page does.
func (e *deskEnv) websocketAt(t *testing.T, host, path, cookie string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, n, e.edge)
	}, TLSClientConfig: &tls.Config{RootCAs: e.pool, NextProtos: []string{"http/1.1"}}}
	ws, res, err := d.Dial("wss://"+host+path, http.Header{"Origin": {"https://" + host}, "Cookie": {cookie}})
	if err != nil {
		t.Fatalf("websocket %s: %v (%v)", path, err, res)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// rfb is a test's own VNC client (shared) through the edge's bridge, on
// host with the session cookie.
func (e *deskEnv) rfb(t *testing.T, host, cookie string) *testkit.RFB {
	t.Helper()
	c, err := testkit.NewRFB(testkit.NewWSStream(e.websocket(t, host, cookie)), true)
	if err != nil {
		t.Fatalf("RFB through the edge: %v", err)
	}
	return c
}

// browser is a headless Chromium whose names under froog.test reach the
// edge (rules adds more), trusting any certificate as the other browser
// tests do (the local CA is not in its store).
func (e *deskEnv) browser(t *testing.T, w, h int, rules ...string) context.Context {
	t.Helper()
	return e.browserWith(t, w, h, nil, rules...)
}

// browserWith is browser with more of Chromium's options (later ones
// win: a flag given again replaces the default's).
func (e *deskEnv) browserWith(t *testing.T, w, h int, extra []chromedp.ExecAllocatorOption, rules ...string) context.Context {
	t.Helper()
	_, port, _ := net.SplitHostPort(e.edge)
	resolve := chromedp.Flag("host-resolver-rules", strings.Join(append([]string{"MAP *.froog.test 127.0.0.1:" + port}, rules...), ", "))
	ctx, cancel := chromedp.NewContext(browser.Start(t, w, h, append([]chromedp.ExecAllocatorOption{resolve}, extra...)...))
	t.Cleanup(cancel)
	// A bound for the whole session, past its steps' own: the browser
	// view's test (a Chromium inside the sandbox, shown through the
	// viewer) took over 3 minutes in a loaded make test.
	ctx, cancel = context.WithTimeout(ctx, 6*time.Minute)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return ctx
}

// tab opens another tab of the browser of ctx.
func tab(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	tctx, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(tctx); err != nil {
		t.Fatal(err)
	}
	return tctx
}

// openViewer opens a view link in ctx's tab and waits until the viewer
// says it is connected.
func openViewer(t *testing.T, ctx context.Context, link string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 90*time.Second, "the viewer to connect", func() bool {
		s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('st-conn')?.textContent || location.pathname`))
		if strings.HasPrefix(s, "/error/") {
			t.Fatalf("the viewer showed the error page %s", s)
		}
		return strings.HasPrefix(s, "connected")
	})
}

// screenshot takes the tab's picture and keeps it as a test artefact.
func screenshot(t *testing.T, ctx context.Context, name string) image.Image {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	keep(t, name, b)
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// rgb is a pixel of img.
func rgb(img image.Image, x, y int) [3]uint8 {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

// close says whether two colours are within 40 a channel (JPEG, scaling).
func closeTo(a, b [3]uint8) bool {
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < -40 || d > 40 {
			return false
		}
	}
	return true
}

// share is the part of a rectangle of img that is of colour c.
func share(img image.Image, r image.Rectangle, c [3]uint8) float64 {
	r = r.Intersect(img.Bounds())
	n, in := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y += 4 {
		for x := r.Min.X; x < r.Max.X; x += 4 {
			n++
			if closeTo(rgb(img, x, y), c) {
				in++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(in) / float64(n)
}

// keyLogger runs xev on a display as a job of the sandbox, its events in
// file, and waits until its window has the keyboard. xev (x11-utils, a
// few hundred KB) is the smallest X program that says which keys reached
// it: a browser on the display would do too, at the cost of another
// Chromium on two shared cores. Its window fills the screen, and the
// window manager (xfwm4, or openbox where XFCE is missing) gives a new
// window the focus, so that neither needs a click (which a view-only
// viewer cannot send). The window manager starts beside the X server, so
// xev waits for it: a window mapped before it runs is managed without
// the focus.
func (e *deskEnv) keyLogger(t *testing.T, sandbox, display, file string) {
	t.Helper()
	if _, err := exec.LookPath("xev"); err != nil {
		testdep.Missing(t, "xev is not installed (deploy/testdeps.sh installs x11-utils)")
	}
	wm := "DISPLAY=" + display + " xprop -root _NET_SUPPORTING_WM_CHECK _NET_ACTIVE_WINDOW 2>&1 || true"
	wait.For(t, 60*time.Second, "the display's window manager", func() bool {
		return strings.Contains(e.sh(t, sandbox, wm), "_NET_SUPPORTING_WM_CHECK(WINDOW)")
	})
	cmd := fmt.Sprintf("DISPLAY=%s exec stdbuf -oL xev -geometry 1920x1080+0+0 -event keyboard -event focus > %s", display, file)
	body, _ := json.Marshal(map[string]string{"command": cmd})
	e.c.call("POST", "/v1/sandboxes/"+sandbox+"/jobs", string(body), 201, nil)
	if !wait.Until(30*time.Second, func() bool {
		return strings.Contains(e.sh(t, sandbox, "cat "+file+" 2>/dev/null || true"), "FocusIn event")
	}) {
		t.Fatalf("xev's window never had the keyboard; the root window: %s; xev's output: %q",
			e.sh(t, sandbox, wm), e.sh(t, sandbox, "head -c 2000 "+file+" 2>&1 || true"))
	}
}

// keyPressRE finds a key press in xev's output and its keysym's name.
var keyPressRE = regexp.MustCompile(`(?s)KeyPress event.*?\(keysym 0x[0-9a-f]+, (\w+)\)`)

// keysSeen are the keysyms of the key presses in xev's file.
func (e *deskEnv) keysSeen(t *testing.T, sandbox, file string) string {
	t.Helper()
	var keys []string
	for _, m := range keyPressRE.FindAllStringSubmatch(e.sh(t, sandbox, "cat "+file), -1) {
		keys = append(keys, m[1])
	}
	return strings.Join(keys, " ")
}

// Keys typed in the viewer reach an application on the sandbox's
// display; in a view-only viewer, and from a test's own RFB client with a
// view-only session, they do not. The viewer works inside a cross-site
// iframe: the screen's picture shows in it.
func TestDesktopViewerInChromium(t *testing.T) {
	t.Parallel()
	e := devDesktop(t)
	e.sandbox(t, "desk")
	display := e.display(t, "desk", "desktop")
	magenta := [3]uint8{255, 0, 255}
	e.sh(t, "desk", "DISPLAY="+display+" xsetroot -solid '#ff00ff'")

	// Inside another site's iframe, served over HTTPS, with the
	// permissions an embedder gives.
	link := e.link(t, "desk", "desktop", "")
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>embedder</title><style>body{margin:0;background:#fff}</style>`+
			`<iframe id="desk" src="%s" allow="autoplay; fullscreen; clipboard-read; clipboard-write" `+
			`style="position:absolute;left:40px;top:30px;width:800px;height:450px;border:0"></iframe>`, link)
	}))
	defer site.Close()
	_, sitePort, _ := net.SplitHostPort(site.Listener.Addr().String())
	ctx := e.browser(t, 1000, 700, "MAP embedder.example 127.0.0.1:"+sitePort)
	if err := chromedp.Do(ctx, chromedp.Navigate("https://embedder.example/")); err != nil {
		t.Fatal(err)
	}
	var img image.Image
	inFrame := image.Rect(40+100, 30+60, 40+700, 30+390) // away from the edges and the overlay
	if !wait.Until(90*time.Second, func() bool {
		img = screenshot(t, ctx, "e2e-viewer-iframe.png")
		return share(img, inFrame, magenta) > 0.9
	}) {
		t.Fatalf("the screen's magenta never showed in the cross-site iframe (%.0f%% of it did; screenshot e2e-viewer-iframe.png)", 100*share(img, inFrame, magenta))
	}
	if s := share(img, image.Rect(860, 0, 1000, 400), [3]uint8{255, 255, 255}); s < 0.9 {
		t.Errorf("the embedder's page is not beside the iframe (%.0f%% white)", 100*s)
	}

	// Keys.
	e.keyLogger(t, "desk", display, "keys.log")
	// A view-only link's viewer: noVNC sends nothing, and the edge would
	// drop it.
	viewOnly := tab(t, ctx)
	openViewer(t, viewOnly, e.link(t, "desk", "desktop?viewonly=1", ""))
	if err := chromedp.Do(viewOnly, chromedp.KeyEvent("q")); err != nil {
		t.Fatal(err)
	}
	screenshot(t, viewOnly, "e2e-viewer-viewonly-keys.png")
	// A hostile client with a view-only session sends key events anyway;
	// the sync after them is answered, so Xvnc has had all it was sent.
	vo := e.link(t, "desk", "desktop?viewonly=1", "")
	u, _ := url.Parse(vo)
	st, cookie := e.session(t, u.Host, u.Fragment)
	if st != 200 {
		t.Fatalf("the view-only link's exchange: %d", st)
	}
	raw := e.rfb(t, u.Host, cookie)
	if err := raw.Key('w'); err != nil {
		t.Fatalf("the raw client's key: %v", err)
	}
	if err := raw.Sync(); err != nil {
		t.Fatalf("the raw client's sync after its key: %v", err)
	}
	// The same client with an ordinary session: its keys arrive, so the
	// one above would have.
	u, _ = url.Parse(e.link(t, "desk", "desktop", ""))
	if st, cookie = e.session(t, u.Host, u.Fragment); st != 200 {
		t.Fatalf("the link's exchange: %d", st)
	}
	full := e.rfb(t, u.Host, cookie)
	if err := full.Key('e'); err != nil {
		t.Fatalf("the full client's key: %v", err)
	}
	if err := full.Sync(); err != nil {
		t.Fatalf("the full client's sync after its key: %v", err)
	}
	// The viewer of an ordinary link: typed keys arrive.
	viewer := tab(t, ctx)
	openViewer(t, viewer, e.link(t, "desk", "desktop", ""))
	if err := chromedp.Do(viewer, chromedp.KeyEvent("z")); err != nil {
		t.Fatal(err)
	}
	var seen string
	if !wait.Until(30*time.Second, func() bool { seen = e.keysSeen(t, "desk", "keys.log"); return strings.Contains(seen, "z") }) {
		t.Fatalf("the key typed in the viewer never reached xev; it saw %q; its log:\n%s", seen, e.sh(t, "desk", "tail -c 3000 keys.log"))
	}
	screenshot(t, viewer, "e2e-viewer-keys.png")
	if seen != "e z" {
		t.Errorf("xev saw key presses %q, want %q: the raw client's e, then the viewer's z, and nothing from a view-only session", seen, "e z")
	}
}

// canvasRect is where the viewer in ctx draws the screen.
func canvasRect(t *testing.T, ctx context.Context) image.Rectangle {
	t.Helper()
	type rect struct{ X, Y, W, H float64 }
	r, err := chromedp.Run(ctx, chromedp.Evaluate[rect](`(() => { const r = document.querySelector('#screen canvas').getBoundingClientRect();
		return {X: r.x, Y: r.y, W: r.width, H: r.height}; })()`))
	if err != nil || r.W < 100 || r.H < 100 {
		t.Fatalf("the viewer's canvas: %+v, %v", r, err)
	}
	return image.Rect(int(r.X), int(r.Y), int(r.X+r.W), int(r.Y+r.H))
}

// ctrl presses Ctrl+key in the tab, as a person does: Control down, the
// key, Control up (noVNC sends what it is given, so the modifier must be
// a key of its own).
func ctrl(key rune) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		c := kb.Encode([]rune(kb.Control)[0]) // down, up
		c[0].Modifiers = int64(chromedp.ModifierCtrl)
		seq := []*input.DispatchKeyEventParams{c[0]}
		for _, k := range kb.Encode(key) {
			if k.Type == kb.KeyChar {
				continue
			}
			k.Modifiers |= int64(chromedp.ModifierCtrl)
			seq = append(seq, k)
		}
		for _, k := range append(seq, c[1]) {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, *k); err != nil {
				return err
			}
		}
		return nil
	})
}

// The browser view through the real binary: Chromium alone on a screen
// of its own shows a page that the sandbox serves, with its tabs and
// address bar (typed into through the viewer); closing its last tab
// brings a new window; a link with another profile replaces the open
// browser; a desktop link can't open the browser view, nor a browser
// link the desktop.
func TestBrowserViewInChromium(t *testing.T) {
	t.Parallel()
	e := devDesktop(t)
	e.sandbox(t, "web")
	home := strings.TrimSpace(e.sh(t, "web", "echo $HOME"))
	port := loopback.FreePort(t)
	e.sh(t, "web", `mkdir -p site && printf '<!doctype html><title>froog page</title><body style="margin:0;background:#ff00ff"><h1>froog</h1>' > site/index.html`)
	e.c.call("POST", "/v1/sandboxes/web/jobs", fmt.Sprintf(`{"command": "python3 -m http.server %d --bind 127.0.0.1 --directory site"}`, port), 201, nil)
	var w struct{ Ready bool }
	if e.c.call("POST", "/v1/sandboxes/web/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, &w); !w.Ready {
		t.Fatal("the sandbox's page server never listened")
	}

	// The cross-links are refused; each link opens its own view.
	dl, _ := url.Parse(e.link(t, "web", "desktop", ""))
	bl, _ := url.Parse(e.link(t, "web", "browser", "{}"))
	if dl.Host == bl.Host {
		t.Fatalf("the desktop and the browser view share the host %s", dl.Host)
	}
	for _, c := range []struct {
		what, host, token string
		want              int
	}{
		{"a desktop link on the browser view's host", bl.Host, dl.Fragment, 403},
		{"a browser link on the desktop's host", dl.Host, bl.Fragment, 403},
		{"the desktop link on its host", dl.Host, dl.Fragment, 200},
	} {
		if st, _ := e.session(t, c.host, c.token); st != c.want {
			t.Errorf("%s: %d, want %d", c.what, st, c.want)
		}
	}

	ctx := e.browser(t, 1280, 800)
	viewer := tab(t, ctx)
	openViewer(t, viewer, bl.String())
	display := func() string {
		var st struct{ Display, Profile string }
		json.Unmarshal([]byte(e.sh(t, "web", "froog-desktop status --kind browser")), &st)
		return st.Display + " " + st.Profile
	}
	first := display()
	if want := filepath.Join(home, ".config", "froog-browser"); !strings.HasSuffix(first, " "+want) {
		t.Fatalf("the browser view runs %q, want the default profile %s", first, want)
	}
	// windows lists the names of the X windows on the browser's display.
	windows := func() string {
		return e.sh(t, "web", "DISPLAY="+strings.Fields(first)[0]+" xwininfo -root -tree | grep -o '\"[^\"]*\"' || true")
	}
	// The picture of the screen in the viewer, its browser's bar (tabs
	// and address bar: the top 7%) and the page under it.
	pic := canvasRect(t, viewer)
	part := func(x0, y0, x1, y1 float64) image.Rectangle {
		return image.Rect(pic.Min.X+int(x0*float64(pic.Dx())), pic.Min.Y+int(y0*float64(pic.Dy())),
			pic.Min.X+int(x1*float64(pic.Dx())), pic.Min.Y+int(y1*float64(pic.Dy())))
	}
	screen, bar := part(0.1, 0.2, 0.9, 0.9), part(0, 0, 1, 0.07)
	black := [3]uint8{0, 0, 0}
	// withBar says whether the picture shows a browser window: its page
	// not black, and a bar above it that is not the page's colour.
	withBar := func(img image.Image) bool {
		page := rgb(img, screen.Min.X+screen.Dx()/2, screen.Min.Y+screen.Dy()/2)
		return share(img, screen, black) < 0.2 && share(img, bar, page) < 0.7
	}
	var img image.Image
	wait.For(t, 90*time.Second, "Chromium's window on the browser view", func() bool {
		img = screenshot(t, viewer, "e2e-browser.png")
		return withBar(img) && strings.Contains(windows(), "Chromium")
	})
	// The address bar: Ctrl+L, the page's address, Enter. Chromium moves
	// the focus to it a moment after Ctrl+L, and what is typed before
	// goes to the page: a person waits, and types it again if it went
	// wrong.
	magenta := [3]uint8{255, 0, 255}
	shown := false
	for try := 0; try < 3 && !shown; try++ {
		if err := chromedp.Do(viewer, ctrl('l')); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := chromedp.Do(viewer, chromedp.KeyEvent(fmt.Sprintf("http://127.0.0.1:%d/\n", port))); err != nil {
			t.Fatal(err)
		}
		shown = wait.Until(20*time.Second, func() bool {
			img = screenshot(t, viewer, "e2e-browser.png")
			return share(img, screen, magenta) > 0.8
		})
	}
	if !shown {
		t.Fatalf("the sandbox's page never showed in the browser view (windows: %s)", windows())
	}
	if s, b := share(img, bar, magenta), share(img, bar, black); s > 0.1 || b > 0.5 {
		t.Errorf("no tabs and address bar above the page: %.0f%% of the bar is the page's colour, %.0f%% black (e2e-browser.png)", 100*s, 100*b)
	}
	if names := windows(); !strings.Contains(names, "froog page - Chromium") {
		t.Errorf("no window named for the page's tab: %s", names)
	}

	// Ctrl+W closes the only tab: its window, and Chromium with it; a new
	// window comes.
	if err := chromedp.Do(viewer, ctrl('w')); err != nil {
		t.Fatal(err)
	}
	if !wait.Until(60*time.Second, func() bool {
		names := windows()
		return !strings.Contains(names, "froog page") && strings.Contains(names, "Chromium")
	}) {
		t.Fatalf("no new window after the last tab closed: %s", windows())
	}
	// Chromium paints its new window a while after the window exists:
	// under the suite's load as long as it took to paint the first one.
	wait.For(t, 90*time.Second, "the new window in the viewer", func() bool {
		img = screenshot(t, viewer, "e2e-browser-new-window.png")
		return withBar(img) && share(img, screen, magenta) < 0.1
	})

	// Another profile replaces the open browser.
	chromedp.Cancel(viewer) // the old viewer would reconnect, asking for its own profile again
	other := filepath.Join(home, "profiles", "second")
	ol, _ := url.Parse(e.link(t, "web", "browser", fmt.Sprintf(`{"profile": %q}`, other)))
	viewer = tab(t, ctx)
	openViewer(t, viewer, ol.String())
	pic = canvasRect(t, viewer)
	screen, bar = part(0.1, 0.2, 0.9, 0.9), part(0, 0, 1, 0.07)
	if now := display(); !strings.HasSuffix(now, " "+other) {
		t.Fatalf("after a link with profile %s the browser view runs %q", other, now)
	}
	wait.For(t, 60*time.Second, "Chromium on the second profile", func() bool {
		out := e.sh(t, "web", "ls "+other+"; pgrep -fc -- '[-]-user-data-dir="+filepath.Join(home, ".config", "froog-browser")+"' || true")
		return strings.Contains(out, "Default") && strings.HasSuffix(strings.TrimSpace(out), "0")
	})
	wait.For(t, 60*time.Second, "the second profile's window in the viewer", func() bool {
		img = screenshot(t, viewer, "e2e-browser-second-profile.png")
		return withBar(img)
	})
}

// wallLink asks the API for the account's wall link.
func (e *deskEnv) wallLink(t *testing.T) string {
	t.Helper()
	var l struct{ URL string }
	e.c.call("POST", "/v1/wall", "", 201, &l)
	return l.URL
}

// tileColours returns, per sandbox id on the wall in ctx, the colour a
// quarter into its picture (a pointer may be in the middle).
func tileColours(t *testing.T, ctx context.Context, img image.Image) map[string][3]uint8 {
	t.Helper()
	type rect struct {
		ID   string
		X, Y float64
	}
	rects, err := chromedp.Run(ctx, chromedp.Evaluate[[]rect](`[...document.querySelectorAll('.tile')].map(e => {
		const r = e.querySelector('.pic').getBoundingClientRect();
		return {ID: e.dataset.id, X: r.x + r.width / 4, Y: r.y + r.height / 4};
	})`))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][3]uint8{}
	for _, r := range rects {
		out[r.ID] = rgb(img, int(r.X), int(r.Y))
	}
	return out
}

// The wall in Chromium through the real binary: with no sandbox (so none
// running) it says so; three sandboxes' tiles show their desktops' colours; a
// click makes one live; Use types into an application on that desktop,
// and Esc — which the tile's viewer has then — goes back to the grid
// without reaching the desktop.
func TestWallInChromium(t *testing.T) {
	t.Parallel()
	e := devDesktop(t)
	// The account has no sandbox yet: its wall host is named by no route,
	// and still has a certificate (viewNames in cmd/froogd).
	ctx := e.browser(t, 1280, 800)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.wallLink(t)), chromedp.WaitVisible("#empty")); err != nil {
		t.Fatal(err)
	}
	if text, _ := chromedp.Run(ctx, chromedp.Text("#empty")); text != "No sandbox is running" {
		t.Errorf("the empty wall says %q", text)
	}
	screenshot(t, ctx, "e2e-wall-empty.png")

	colours := map[string][3]uint8{"w1": {255, 0, 0}, "w2": {0, 192, 0}, "w3": {0, 0, 255}}
	ids := map[string]string{}
	displays := map[string]string{}
	for _, name := range []string{"w1", "w2", "w3"} {
		e.sandbox(t, name)
		var sb struct{ ID string }
		e.c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
		ids[name] = sb.ID
		displays[name] = e.display(t, name, "desktop")
		c := colours[name]
		e.sh(t, name, fmt.Sprintf("DISPLAY=%s xsetroot -solid '#%02x%02x%02x'", displays[name], c[0], c[1], c[2]))
	}
	var got map[string][3]uint8
	if !wait.Until(60*time.Second, func() bool {
		got = tileColours(t, ctx, screenshot(t, ctx, "e2e-wall-3.png"))
		if len(got) != 3 {
			return false
		}
		for name, id := range ids {
			if !closeTo(got[id], colours[name]) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("three tiles of the desktops' colours never showed: %v (ids %v)", got, ids)
	}

	// A click makes w2's tile live: its viewer, view-only.
	if err := chromedp.Do(ctx, chromedp.Click(`.tile[data-id="`+ids["w2"]+`"] .pic`), chromedp.WaitVisible(`.tile.live iframe`)); err != nil {
		t.Fatal(err)
	}
	e.sh(t, "w2", "DISPLAY="+displays["w2"]+" xsetroot -solid '#ffff00'")
	if !wait.Until(30*time.Second, func() bool {
		got = tileColours(t, ctx, screenshot(t, ctx, "e2e-wall-live.png"))
		return closeTo(got[ids["w2"]], [3]uint8{255, 255, 0})
	}) {
		t.Fatalf("the live tile never showed its desktop's new colour: %v", got)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(`iframe`)); err != nil {
		t.Fatal(err)
	}

	// Use: the tile's viewer with input, on the wall.
	e.keyLogger(t, "w1", displays["w1"], "keys.log")
	if err := chromedp.Do(ctx, chromedp.Click(`.tile[data-id="`+ids["w1"]+`"] .use`), chromedp.WaitVisible(`.tile.using iframe`)); err != nil {
		t.Fatal(err)
	}
	// A key typed before the viewer connects goes nowhere: type until
	// one arrives.
	var seen string
	if !wait.Until(60*time.Second, func() bool {
		if err := chromedp.Do(ctx, chromedp.KeyEvent("k")); err != nil {
			t.Fatal(err)
		}
		seen = e.keysSeen(t, "w1", "keys.log")
		return strings.Contains(seen, "k")
	}) {
		t.Fatalf("a key typed on the wall in Use never reached w1's xev; it saw %q", seen)
	}
	screenshot(t, ctx, "e2e-wall-use.png")
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(`iframe`), chromedp.WaitNotPresent(`.tile.using`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("j")); err != nil {
		t.Fatal(err)
	}
	if seen = e.keysSeen(t, "w1", "keys.log"); strings.Contains(seen, "Escape") || strings.Contains(seen, "j") {
		t.Errorf("after Esc went back to the grid, w1's xev saw %q: Esc or a key typed on the grid reached the desktop", seen)
	}
}
