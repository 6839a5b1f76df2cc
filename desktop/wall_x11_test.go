package desktop

import (
	"bytes"
	"context"
	"fmt"
	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/names"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// The tile of a real Xvnc desktop shows its colour, and a new colour
// within 3 s.
func TestTileXvnc(t *testing.T) {
	port, display := xDesktop(t, 640, 360, "#00ff00")
	h := newWallHarness(t, Options{TileEvery: time.Second})
	h.starter.set(sbxA, port)
	h.accounts.set(acctA, WallSandbox{ID: sbxA, Name: "x"})
	c := h.cookie(acctA)
	_, stop := h.events(acctA, c)
	defer stop()
	colour := func() [3]byte {
		res := h.do("GET", h.host(names.ViewWall, acctA), PathWallTile+sbxA+".jpg", nil, c, nil)
		defer res.Body.Close()
		img, err := jpeg.Decode(res.Body)
		if err != nil {
			return [3]byte{}
		}

		if b := img.Bounds(); b.Dx() != 480 || b.Dy() != 270 {
			t.Errorf("tile %v, want 480x270", b)
		}
		return testkit.RGBAt(img, 120, 70) // away from the middle, where a pointer may be
	}
	wait.For(t, 10*time.Second, "a green tile", func() bool { return testkit.Near(colour(), [3]byte{0, 255, 0}) })
	if out, err := exec.Command("xsetroot", "-display", display, "-solid", "#0000ff").CombinedOutput(); err != nil {
		t.Fatalf("xsetroot: %v: %s", err, out)
	}
	at := time.Now()
	wait.For(t, 5*time.Second, "a blue tile", func() bool { return testkit.Near(colour(), [3]byte{0, 0, 255}) })
	t.Logf("the new colour showed after %v", time.Since(at).Round(10*time.Millisecond))
	if n := h.srv.tiles.dials.Load(); n != 1 {
		t.Errorf("%d RFB connections, want 1", n)
	}
}

// The wall page in headless Chromium, on view hosts under froog.test
// (mapped to the test server): empty, three tiles of three real
// desktops, a fourth that starts, one that stops, and a tile made live.
func TestWallChromium(t *testing.T) {
	testdep.Short(t, "drives Chromium")
	colours := map[string][3]byte{"#ff0000": {255, 0, 0}, "#00c000": {0, 192, 0}, "#0000ff": {0, 0, 255}}
	ids := []string{"sbx_00000000000000a1", "sbx_00000000000000a2", "sbx_00000000000000a3", "sbx_00000000000000a4"}
	labels := []string{"red", "green", "blue", "red-again"}
	want := map[string][3]byte{}
	h := newWallHarness(t, Options{TileEvery: time.Second, TileGrace: time.Second})
	var displays []string
	for i, hex := range []string{"#ff0000", "#00c000", "#0000ff"} {
		port, display := xDesktop(t, 640, 360, hex)
		displays = append(displays, display)
		h.starter.set(ids[i], port)
		want[ids[i]] = colours[hex]
	}
	h.starter.set(ids[3], h.starter.ports[ids[0]])
	want[ids[3]] = colours["#ff0000"]
	for _, id := range ids {
		h.sbs.set(id, started, true)
	}
	sbs := func(n ...int) {
		var list []WallSandbox
		for _, i := range n {
			list = append(list, WallSandbox{ID: ids[i], Name: labels[i], Since: started})
		}
		h.accounts.set(acctA, list...)
	}
	h.linker.mint = func(account, sandbox string, viewOnly bool) (string, error) {
		tok := "dt_" + strings.Repeat("l", 20) + fmt.Sprint(time.Now().UnixNano())
		h.links.add(tok, Link{SandboxID: sandbox, Kind: names.ViewDesktop, ViewOnly: viewOnly, Run: started, ExpiresAt: time.Now().Add(10 * time.Minute)})
		return "https://" + h.host(names.ViewDesktop, sandbox) + "/#" + tok, nil
	}

	art := artefacts(t)
	actx := browser.Start(t, 1200, 700, chromedp.Flag("host-resolver-rules", "MAP *.froog.test 127.0.0.1"))
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	shoot := func(name string) []byte {
		t.Helper()
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(art, name), shot, 0o644)
		return shot
	}
	// tileColours returns, per sandbox shown, the screenshot's colour at
	// the middle of its picture.
	tileColours := func() map[string][3]byte {
		type rect struct {
			ID   string
			X, Y float64
		}
		rects, err := chromedp.Run(ctx, chromedp.Evaluate[[]rect](`[...document.querySelectorAll('.tile')].map(e => {
			const r = e.querySelector('.pic').getBoundingClientRect();
			return {ID: e.dataset.id, X: r.x + r.width / 4, Y: r.y + r.height / 4}; // the pointer is in the middle
		})`))
		if err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][3]byte{}
		for _, r := range rects {
			out[r.ID] = testkit.RGBAt(img, int(r.X), int(r.Y))
		}
		return out
	}
	showing := func(n ...int) func() bool {
		return func() bool {
			got := tileColours()
			if len(got) != len(n) {
				return false
			}
			for _, i := range n {
				if c, ok := got[ids[i]]; !ok || !testkit.Near(c, want[ids[i]]) {
					return false
				}
			}
			return true
		}
	}

	sbs()
	wall := "https://" + h.host(names.ViewWall, acctA) + "/#" + h.wallLink(acctA, time.Now().Add(10*time.Minute))
	if err := chromedp.Do(ctx, chromedp.Navigate(wall), chromedp.WaitVisible("#empty")); err != nil {
		t.Fatal(err)
	}
	if text, _ := chromedp.Run(ctx, chromedp.Text("#empty")); text != "No sandbox is running" {
		t.Errorf("empty wall says %q", text)
	}
	if url, _ := chromedp.Run(ctx, chromedp.Location()); strings.Contains(url, "dt_") {
		t.Errorf("the token is still in the address bar: %s", url)
	}
	shoot("wall-empty.png")

	sbs(0, 1, 2)
	if !wait.Until(20*time.Second, showing(0, 1, 2)) {
		shoot("wall-3.png")
		t.Fatalf("three tiles of their desktops' colours never showed: %v", tileColours())
	}
	shoot("wall-3.png")

	at := time.Now()
	sbs(0, 1, 2, 3)
	if !wait.Until(10*time.Second, showing(0, 1, 2, 3)) {
		t.Fatalf("the fourth tile never showed: %v", tileColours())
	}
	t.Logf("a started sandbox's tile showed its picture after %v", time.Since(at).Round(10*time.Millisecond))
	sbs(0, 2, 3)
	if !wait.Until(5*time.Second, showing(0, 2, 3)) {
		t.Fatalf("the stopped sandbox's tile stayed: %v", tileColours())
	}

	// A click makes the tile live: the desktop's viewer in an iframe,
	// whose new colour shows within 2 s; Esc goes back to pictures.
	if err := chromedp.Do(ctx, chromedp.Click(`.tile[data-id="`+ids[2]+`"] .pic`), chromedp.WaitVisible(`.tile.live iframe`)); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("xsetroot", "-display", displays[2], "-solid", "#ffff00").CombinedOutput(); err != nil {
		t.Fatalf("xsetroot: %v: %s", err, out)
	}
	want[ids[2]] = [3]byte{255, 255, 0}
	if !wait.Until(10*time.Second, showing(0, 2, 3)) {
		shoot("wall-live.png")
		t.Fatalf("the live tile never showed the new colour: %v", tileColours())
	}
	shoot("wall-live.png")
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\x1b")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(`iframe`)); err != nil {
		t.Fatal(err)
	}

	// Use gives the tile's viewer the keyboard; Esc, which goes to the
	// viewer then, still goes back to the grid.
	if err := chromedp.Do(ctx, chromedp.Click(`.tile[data-id="`+ids[0]+`"] .use`), chromedp.WaitVisible(`.tile.using iframe`)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the viewer in Use to have the keyboard", func() bool {
		focused, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.activeElement?.tagName === 'IFRAME' && document.hasFocus()`))
		return focused
	})
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\x1b")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(`iframe`), chromedp.WaitNotPresent(`.tile.using`)); err != nil {
		t.Fatal(err)
	}
}

// Fifty sandboxes on one wall, in Chromium: fifty tiles, each with its
// own RFB connection at the edge and its desktop's picture. Fifty
// sandboxes with an Xvnc and a window manager each are more than the
// test suite's machine should start at once (and froogd dev's account
// runs 10), so the desktops are cheap: five real Xvnc servers at
// 640x360, each the desktop of ten sandboxes — the edge still keeps one
// connection, one picture and one encoding per sandbox.
func TestWallFiftyChromium(t *testing.T) {
	testdep.Short(t, "drives Chromium")
	const n = 50
	colours := [][3]byte{{255, 0, 0}, {0, 192, 0}, {0, 0, 255}, {255, 255, 0}, {0, 255, 255}}
	h := newWallHarness(t, Options{TileEvery: time.Second, TileGrace: time.Second})
	var ports []int
	for _, c := range colours {
		port, _ := xDesktop(t, 640, 360, fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2]))
		ports = append(ports, port)
	}
	var list []WallSandbox
	want := map[string][3]byte{}
	for i := range n {
		id := fmt.Sprintf("sbx_%016x", 0xb000+i)
		h.starter.set(id, ports[i%len(ports)])
		h.sbs.set(id, started, true)
		want[id] = colours[i%len(colours)]
		list = append(list, WallSandbox{ID: id, Name: fmt.Sprintf("s%02d", i), Since: started})
	}
	h.accounts.set(acctA, list...)

	actx := browser.Start(t, 1600, 1000, chromedp.Flag("host-resolver-rules", "MAP *.froog.test 127.0.0.1"))
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	began := time.Now()
	wall := "https://" + h.host(names.ViewWall, acctA) + "/#" + h.wallLink(acctA, time.Now().Add(10*time.Minute))
	if err := chromedp.Do(ctx, chromedp.Navigate(wall)); err != nil {
		t.Fatal(err)
	}
	// Each tile's picture as the page has it, sampled a quarter in (the
	// pictures are the page's own: a canvas may read them).
	type tile struct {
		ID  string
		RGB [3]byte
	}
	var tiles []tile
	showing := func() int {
		var err error
		tiles, err = chromedp.Run(ctx, chromedp.Evaluate[[]tile](`[...document.querySelectorAll('.tile')].map(e => {
			const img = e.querySelector('img'), c = document.createElement('canvas');
			if (!img.complete || !img.naturalWidth) return {ID: e.dataset.id, RGB: [0, 0, 0]};
			c.width = img.naturalWidth; c.height = img.naturalHeight;
			const g = c.getContext('2d'); g.drawImage(img, 0, 0);
			const d = g.getImageData(c.width / 4, c.height / 4, 1, 1).data;
			return {ID: e.dataset.id, RGB: [d[0], d[1], d[2]]};
		})`))
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, tl := range tiles {
			if testkit.Near(tl.RGB, want[tl.ID]) {
				ok++
			}
		}
		return ok
	}
	var got int
	if !wait.Until(2*time.Minute, func() bool { got = showing(); return got == n && len(tiles) == n }) {
		t.Fatalf("%d tiles, %d of them with their desktop's picture; want %d", len(tiles), got, n)
	}
	t.Logf("%d tiles showed their pictures %v after the wall opened", n, time.Since(began).Round(100*time.Millisecond))
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(artefacts(t), "wall-50.jpg"), shot, 0o644)
	if o := h.srv.tiles.open(); o != n {
		t.Errorf("%d tile connections open for %d tiles, want one each", o, n)
	}
	if lost := strings.Count(h.logs.String(), "desktop tile lost"); lost > 0 {
		t.Errorf("%d tile connections lost: %s", lost, h.logs.String())
	}
	t.Logf("%d RFB connections made", h.srv.tiles.dials.Load())
	if text, _ := chromedp.Run(ctx, chromedp.Text("#count")); text != "50 sandboxes" {
		t.Errorf("the wall's count says %q", text)
	}
}
