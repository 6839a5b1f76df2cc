package desktop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"froog.tech/froog/internal/browser"
	"froog.tech/froog/names"
	"image/png"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// realDesktop runs TigerVNC's Xvnc (an X server that is its own VNC
// server, as froog-desktop runs it in a sandbox) with a magenta root
// window, and returns its VNC port. It skips the test where Xvnc is not
// installed (deploy/testdeps.sh installs it). -noreset: without it the X
// server forgets the root colour when xsetroot, its only client so far,
// disconnects.
func realDesktop(t *testing.T, w, h int) int {
	t.Helper()
	port, _ := xDesktop(t, w, h, "#ff00ff")
	return port
}

// xDesktop is realDesktop with a root window of the given colour; it
// also returns the X display, for xsetroot.
func xDesktop(t testing.TB, w, h int, colour string) (port int, display string) {
	t.Helper()
	for _, bin := range []string{"Xvnc", "xsetroot"} {
		if _, err := exec.LookPath(bin); err != nil {
			testdep.Missing(t, "%s is not installed (deploy/testdeps.sh installs it)", bin)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	x := exec.Command("Xvnc", "-displayfd", "3", "-geometry", fmt.Sprintf("%dx%d", w, h), "-depth", "24",
		"-rfbport", fmt.Sprint(port), "-interface", "127.0.0.1", "-SecurityTypes", "None", "-AlwaysShared",
		"-UseBlacklist=0", "-nolisten", "tcp", "-noreset") // no blacklist, as froog-desktop runs it
	x.ExtraFiles = []*os.File{wr}
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	t.Cleanup(func() { x.Process.Kill(); x.Wait() })
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if err != nil {
		t.Fatalf("Xvnc did not say its display: %v", err)
	}
	display = ":" + strings.TrimSpace(line)
	paint(t, display, colour)
	wait.For(t, 20*time.Second, "Xvnc to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return port, display
}

// Two viewers through the bridge to a real Xvnc at once each see the
// display's colour.
func TestBridgeXvnc(t *testing.T) {
	port := realDesktop(t, 320, 240)
	h := newHarness(t, viewA, port)
	_, full := h.exchange(h.link(false), false)
	_, watcher := h.exchange(h.link(true), false)
	var wg sync.WaitGroup
	for i, c := range []*struct {
		cookie string
		got    [3]byte
	}{{cookie: full.Value}, {cookie: watcher.Value}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, _, err := h.dialWS(full, "")
			if i == 1 {
				ws, _, err = h.dialWS(watcher, "")
			}
			if err != nil {
				t.Error(err)
				return
			}
			defer ws.Close()
			rc, err := testkit.NewRFB(testkit.NewWSStream(ws), false)
			if err != nil {
				t.Errorf("viewer %d: RFB through the bridge: %v", i, err)
				return
			}
			// The first frames may predate the paint.
			wait.Until(10*time.Second, func() bool {
				c.got, err = rc.Pixel(0, 0)
				return err != nil || c.got == [3]byte{255, 0, 255}
			})
			if err != nil || c.got != [3]byte{255, 0, 255} {
				t.Errorf("viewer %d: got colour %v (%v), want magenta", i, c.got, err)
			}
		}()
	}
	wg.Wait()
}

// The viewer page in headless Chromium: the link opens the display's
// picture, and the page's looks and error pages are kept as screenshots
// under .artefacts/desktop/ (or $FROOG_ARTEFACTS/desktop/).
func TestViewerChromium(t *testing.T) {
	testdep.Short(t, "drives Chromium")
	port := realDesktop(t, 640, 400)
	h := newHarness(t, viewA, port)
	art := artefacts(t)

	actx := browser.Start(t, 800, 500)

	for _, c := range []struct {
		name, query string
		viewOnly    bool
		magenta     bool   // the display's picture must show
		selector    string // must be visible
		hidden      string // must not be visible
	}{
		{name: "viewer-dark", query: "", magenta: true, selector: "#menu-button"},
		{name: "viewer-light-menu", query: "?theme=light", magenta: true, selector: "#clipboard"},
		{name: "viewer-overlay0", query: "?overlay=0", magenta: true, hidden: "#status"},
		{name: "viewer-viewonly-link", viewOnly: true, magenta: true, selector: "#viewonly-note", hidden: "#clipboard"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := chromedp.NewContext(actx)
			defer cancel()
			ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			tok := h.link(c.viewOnly)
			if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/"+c.query+"#"+tok), chromedp.WaitVisible("#screen canvas")); err != nil {
				t.Fatal(err)
			}
			url, err := chromedp.Run(ctx, chromedp.Location())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(url, tok) {
				t.Errorf("the token is still in the address bar: %s", url)
			}
			if c.selector == "#clipboard" || c.selector == "#viewonly-note" {
				if err := chromedp.Do(ctx, chromedp.Click("#menu-button")); err != nil {
					t.Fatal(err)
				}
			}
			var shot []byte
			ok := wait.Until(20*time.Second, func() bool {
				s, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
				if err != nil {
					return false
				}
				shot = s
				return !c.magenta || magentaAt(shot, 0.3, 0.5)
			})
			os.WriteFile(filepath.Join(art, c.name+".png"), shot, 0o644)
			if !ok {
				t.Fatalf("the display's magenta never showed in the viewer (screenshot in %s)", art)
			}
			if c.selector != "" {
				if err := chromedp.Do(ctx, chromedp.WaitVisible(c.selector)); err != nil {
					t.Errorf("%s not visible: %v", c.selector, err)
				}
			}
			if c.hidden != "" {
				visible, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector(`+"`"+c.hidden+"`"+`); return !!e && e.offsetParent !== null && !e.closest('[hidden]'); })()`))
				if visible {
					t.Errorf("%s is visible", c.hidden)
				}
			}
		})
	}

	// Error pages, reached the way a person reaches them.
	expired := "dt_" + strings.Repeat("e", 30)
	h.links.add(expired, Link{SandboxID: sbxA, Kind: names.ViewDesktop, Run: started, ExpiresAt: h.clock().Add(-time.Second)})
	other := "dt_" + strings.Repeat("o", 30)
	h.links.add(other, Link{SandboxID: sbxB, Kind: names.ViewDesktop, Run: started, ExpiresAt: h.clock().Add(time.Minute)})
	for _, c := range []struct{ name, token, code string }{
		{"error-link-expired", expired, CodeLinkExpired},
		{"error-wrong-view", other, CodeWrongView},
		{"error-link-invalid", "dt_" + strings.Repeat("n", 30), CodeLinkInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := chromedp.NewContext(actx)
			defer cancel()
			ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/#"+c.token), chromedp.WaitVisible(`main[data-code="`+c.code+`"]`)); err != nil {
				t.Fatal(err)
			}
			text, err := chromedp.Run(ctx, chromedp.Text("h1"))
			if err != nil {
				t.Fatal(err)
			}
			shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(art, c.name+".png"), shot, 0o644)
			if text != errorTexts[c.code].title {
				t.Errorf("got heading %q, want %q", text, errorTexts[c.code].title)
			}
		})
	}

	// A stop of the sandbox turns an open viewer into the stopped page.
	t.Run("error-sandbox-stopped", func(t *testing.T) {
		ctx, cancel := chromedp.NewContext(actx)
		defer cancel()
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/#"+h.link(false)), chromedp.WaitVisible("#screen canvas")); err != nil {
			t.Fatal(err)
		}
		h.sandboxes.set(sbxA, time.Time{}, false)
		defer h.sandboxes.set(sbxA, started, true)
		if err := chromedp.Do(ctx, chromedp.WaitVisible(`main[data-code="`+CodeSandboxStopped+`"]`)); err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(art, "error-sandbox-stopped.png"), shot, 0o644)
	})

	// The rest of the error pages: a desktop that does not start, a page
	// opened without a link (a browser of its own: no cookie), and the
	// page of a connection the edge closed for breaking its session's
	// rules.
	for _, c := range []struct {
		name, code string
		open       func(ctx context.Context) error
	}{
		{"error-desktop-failed", CodeDesktopFailed, func(ctx context.Context) error {
			h.starter.mu.Lock()
			h.starter.err = errors.New("no desktop")
			h.starter.mu.Unlock()
			defer func() { h.starter.mu.Lock(); h.starter.err = nil; h.starter.mu.Unlock() }()
			return chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/#"+h.link(false)), chromedp.WaitVisible(`main[data-code="`+CodeDesktopFailed+`"]`))
		}},
		{"error-no-session", CodeNoSession, func(ctx context.Context) error {
			return chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/"))
		}},
		{"error-refused", CodeRefused, func(ctx context.Context) error {
			return chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+PathError+CodeRefused))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			browser, cancel := chromedp.NewContext(actx)
			defer cancel()
			if err := chromedp.Do(browser); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext()) // no cookies
			defer cancel()
			ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := c.open(ctx); err != nil {
				t.Fatal(err)
			}
			if err := chromedp.Do(ctx, chromedp.WaitVisible(`main[data-code="`+c.code+`"]`)); err != nil {
				t.Fatal(err)
			}
			text, err := chromedp.Run(ctx, chromedp.Text("h1"))
			if err != nil {
				t.Fatal(err)
			}
			shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(art, c.name+".png"), shot, 0o644)
			if text != errorTexts[c.code].title {
				t.Errorf("got heading %q, want %q", text, errorTexts[c.code].title)
			}
		})
	}
}

// artefacts is the folder for the screenshots the tests keep:
// $FROOG_ARTEFACTS/desktop, or else the repository's .artefacts/desktop
// (ignored by git).
func artefacts(t *testing.T) string {
	dir := os.Getenv("FROOG_ARTEFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".artefacts")
	}
	dir = filepath.Join(dir, "desktop")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// magentaAt reports whether the screenshot's pixel at (fx, fy) of its
// size is magenta.
func magentaAt(shot []byte, fx, fy float64) bool {
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		return false
	}
	b := img.Bounds()
	r, g, bl, _ := img.At(b.Min.X+int(fx*float64(b.Dx())), b.Min.Y+int(fy*float64(b.Dy()))).RGBA()
	return r>>8 > 230 && g>>8 < 30 && bl>>8 > 230
}
