package desktop

import (
	"bytes"
	"context"
	"froog.tech/froog/internal/browser"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// colourAt reports whether the screenshot's pixel at (fx, fy) of its size
// is within 40 of want in every channel.
func colourAt(shot []byte, fx, fy float64, want color.RGBA) bool {
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		return false
	}
	b := img.Bounds()
	r, g, bl, _ := img.At(b.Min.X+int(fx*float64(b.Dx())), b.Min.Y+int(fy*float64(b.Dy()))).RGBA()
	near := func(a uint32, w uint8) bool { d := int(a>>8) - int(w); return d > -40 && d < 40 }
	return near(r, want.R) && near(g, want.G) && near(bl, want.B)
}

var fakeMagenta = color.RGBA{255, 0, 255, 255}

// The viewer page in headless Chromium with the stream: it draws
// Selkies' JPEG stripes (through the real edge handler, from fakeSelkies)
// and shows the frame rate; ☰ → Connection switches to VNC and back;
// a full session's keys and clicks reach Selkies in its vocabulary, a
// view-only page's never do; and the page falls back to VNC (fakeRFB's
// magenta), saying why, when Selkies is absent and when it sends nothing.
// Screenshots go to .artefacts/desktop/.
func TestViewerStreamChromium(t *testing.T) {
	testdep.Short(t, "drives Chromium")
	vnc := newFakeRFB(t, [3]byte{255, 0, 255})
	art := filepath.Join("..", ".artefacts", "desktop")
	os.MkdirAll(art, 0o755)
	actx := browser.Start(t, 800, 500)
	master := SelkiesMaster(testKey, viewA.ID, viewA.Kind)

	open := func(t *testing.T, h *harness, viewOnly bool, query string) context.Context {
		ctx, cancel := chromedp.NewContext(actx)
		t.Cleanup(cancel)
		ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
		t.Cleanup(cancel)
		if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/"+query+"#"+h.link(viewOnly))); err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	// shows waits until the centre of the page is want and the status
	// line matches status, and keeps the screenshot as name.
	shows := func(t *testing.T, ctx context.Context, name string, want color.RGBA, status *regexp.Regexp) {
		t.Helper()
		var shot []byte
		var line string
		ok := wait.Until(20*time.Second, func() bool {
			s, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				return false
			}
			shot = s
			line, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('status').textContent`))
			return colourAt(shot, 0.5, 0.5, want) && status.MatchString(line)
		})
		os.WriteFile(filepath.Join(art, name+".png"), shot, 0o644)
		if !ok {
			t.Fatalf("%s: the page never showed %v with status %q (status %q; screenshot in %s)", name, want, status, line, art)
		}
	}

	t.Run("stream-jpeg", func(t *testing.T) {
		fake := newFakeSelkies(t, master, fakeGreen)
		h, _ := newStreamHarness(t, viewA, vnc.port(), fake.port())
		ctx := open(t, h, false, "")
		shows(t, ctx, "stream-jpeg", fakeGreen, regexp.MustCompile(`connected · JPEG · [1-9][0-9]* fps`))
		h264, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
			if (typeof VideoDecoder === 'undefined') return false;
			const r = await VideoDecoder.isConfigSupported({codec: 'avc1.42E01F', codedWidth: 1920, codedHeight: 1080});
			return !!r.supported; })()`, chromedp.EvalAwaitPromise))
		t.Logf("this Chromium's WebCodecs decodes H.264: %v (err %v)", h264, err)
		settings := ""
		for _, m := range fake.texts("controller") {
			if strings.HasPrefix(m, "SETTINGS,") {
				settings = m
			}
		}
		if !strings.Contains(settings, `"displayId":"primary"`) {
			t.Errorf("the page's SETTINGS: %q", settings)
		}

		// The sandbox's clipboard is in the menu's box.
		if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('clipboard').value`)); got != "from the sandbox ✓" {
			t.Errorf("the clipboard box holds %q", got)
		}

		// Input, in Selkies' words: a click and a key.
		if err := chromedp.Do(ctx, chromedp.MouseClickXY(400, 250), chromedp.KeyEvent("a")); err != nil {
			t.Fatal(err)
		}
		if !wait.Until(10*time.Second, func() bool {
			got := fake.texts("controller")
			return slices.Contains(got, "kd,97") && slices.Contains(got, "ku,97") &&
				slices.ContainsFunc(got, func(m string) bool { return regexp.MustCompile(`^m,\d+,\d+,1,0$`).MatchString(m) })
		}) {
			t.Errorf("the click and key did not reach Selkies: %q", fake.texts("controller"))
		}

		// ☰'s clipboard and keys: cw,BASE64 and a chord of kd/ku.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
			document.getElementById('clipboard').value = 'héllo';
			document.getElementById('clipboard-send').click();
			document.querySelector('button[data-key="esc"]').click();
			return true; })()`)); err != nil {
			t.Fatal(err)
		}
		if !wait.Until(10*time.Second, func() bool {
			got := fake.texts("controller")
			return slices.Contains(got, "cw,aMOpbGxv") && slices.Contains(got, "kd,65307") && slices.Contains(got, "ku,65307")
		}) {
			t.Errorf("the menu's clipboard and Esc did not reach Selkies: %q", fake.texts("controller"))
		}

		// ☰ → Connection: VNC by hand, then back.
		pick := func(v string) {
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById('transport'); s.value = '`+v+`'; s.dispatchEvent(new Event('change')); return true; })()`)); err != nil {
				t.Fatal(err)
			}
		}
		pick("vnc")
		shows(t, ctx, "stream-menu-vnc", fakeMagenta, regexp.MustCompile(`connected · VNC · \d+ fps \d`))
		pick("auto")
		shows(t, ctx, "stream-menu-auto", fakeGreen, regexp.MustCompile(`connected · JPEG · [1-9][0-9]* fps`))
	})

	// H.264 through WebCodecs: Debian's Chromium decodes it (checked
	// above); the stand-in's stream is pcmH264's, a keyframe then P
	// pictures, over and over.
	t.Run("stream-h264", func(t *testing.T) {
		blue := color.RGBA{30, 60, 220, 255}
		fake := newFakeSelkies(t, master, blue)
		fake.h264 = pcmH264(fake.w, fake.h, blue, 10)
		h, _ := newStreamHarness(t, viewA, vnc.port(), fake.port())
		ctx := open(t, h, false, "")
		shows(t, ctx, "stream-h264", blue, regexp.MustCompile(`connected · H\.264 · [1-9][0-9]* fps`))
	})

	t.Run("stream-viewonly", func(t *testing.T) {
		fake := newFakeSelkies(t, master, fakeGreen)
		fake.noSize = true // and the page sizes its picture by the stripes
		h, _ := newStreamHarness(t, viewA, vnc.port(), fake.port())
		ctx := open(t, h, true, "")
		shows(t, ctx, "stream-viewonly", fakeGreen, regexp.MustCompile(`connected · JPEG · [1-9][0-9]* fps · view only 64×48`))
		// The page sends no input; a page that tried (here, the test in
		// its place) would get nothing through the edge either.
		if err := chromedp.Do(ctx, chromedp.MouseClickXY(400, 250), chromedp.KeyEvent("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
			const ws = new WebSocket('wss://' + location.host + '/stream');
			ws.onopen = () => { ws.send('kd,98'); ws.send('m,1,1,1,0'); ws.send('cw,aGk='); ws.send('CLIENT_FRAME_ACK 7'); };
			return true; })()`)); err != nil {
			t.Fatal(err)
		}
		if !wait.Until(10*time.Second, func() bool { return slices.Contains(fake.texts("viewer"), "CLIENT_FRAME_ACK 7") }) {
			t.Fatalf("the hostile page's last message never arrived: %q", fake.texts("viewer"))
		}
		for _, m := range fake.texts("viewer") {
			if !watcherMayForward(m) {
				t.Errorf("a view-only page's %q reached Selkies", m)
			}
		}
		if c := fake.texts("controller"); len(c) > 0 {
			t.Errorf("a view-only page reached Selkies as a controller: %q", c)
		}
	})

	t.Run("fallback-absent", func(t *testing.T) {
		h, _ := newStreamHarness(t, viewA, vnc.port(), 0)
		ctx := open(t, h, false, "")
		shows(t, ctx, "stream-fallback-absent", fakeMagenta, regexp.MustCompile(`connected · VNC · \d+ fps \(fast stream: not offered here\)`))
	})

	t.Run("fallback-silent", func(t *testing.T) {
		fake := newFakeSelkies(t, master, fakeGreen)
		fake.silent = true
		h, _ := newStreamHarness(t, viewA, vnc.port(), fake.port())
		ctx := open(t, h, false, "")
		shows(t, ctx, "stream-fallback-silent", fakeMagenta, regexp.MustCompile(`connected · VNC · \d+ fps \(fast stream: no picture within 5 s\)`))
		if _, _, _, conns := fake.stats(); conns == 0 {
			t.Errorf("the page never tried the stream")
		}
	})
}
