package e2e_test

import (
	"encoding/json"
	"image"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// The local driver's desktop as the docs show one: XFCE's panel on the
// background and a browser window, seen through the viewer in Chromium
// (the picture is kept as e2e-local-desktop.png). The desktop is started
// by its link alone, as a user's is: the edge asks froog-desktop for the
// browser window (--desktop-browser, on unless turned off).
func TestLocalDesktopLooksLikeTheDocs(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"xfwm4", "xfce4-panel", "xwininfo"} {
		testdep.Need(t, bin)
	}
	e := devDesktopWith(t, devOptions{env: []string{"FROOG_DESKTOP_BROWSER=true"}})
	e.sandbox(t, "looks")
	ctx := e.browser(t, 1280, 800)
	openViewer(t, ctx, e.link(t, "looks", "desktop", ""))
	var st struct{ Display string }
	if err := json.Unmarshal([]byte(e.sh(t, "looks", "froog-desktop status --kind desktop")), &st); err != nil || st.Display == "" {
		t.Fatalf("froog-desktop status: %v %+v", err, st)
	}
	windows := func() string {
		return e.sh(t, "looks", "DISPLAY="+st.Display+" xwininfo -root -tree | grep -o '\"[^\"]*\"' || true")
	}
	wait.For(t, 90*time.Second, "XFCE's panel and a browser window on the desktop", func() bool {
		w := windows()
		return strings.Contains(w, "xfce4-panel") && strings.Contains(w, "Chromium")
	})
	pic := canvasRect(t, ctx)
	// part is a part of the screen's picture, in the screen's pixels.
	part := func(x0, y0, x1, y1 int) image.Rectangle {
		sx, sy := float64(pic.Dx())/1920, float64(pic.Dy())/1080
		return image.Rect(pic.Min.X+int(float64(x0)*sx), pic.Min.Y+int(float64(y0)*sy), pic.Min.X+int(float64(x1)*sx), pic.Min.Y+int(float64(y1)*sy))
	}
	background := [3]uint8{0x3b, 0x42, 0x52} // guest.DefaultBackground
	white := [3]uint8{255, 255, 255}
	panel, beside := part(0, 0, 1920, 20), part(20, 300, 140, 700)
	page := part(300, 300, 1300, 800) // about:blank, under the browser's tabs and address bar
	var img image.Image
	var why string
	// XFCE's panel draws once its plugins have loaded, which on a busy
	// machine is a minute or more after its window is there; a screenshot
	// is costly, so one a second.
	if !wait.UntilEvery(3*time.Minute, time.Second, func() bool {
		img = screenshot(t, ctx, "e2e-local-desktop.png")
		switch {
		case share(img, beside, background) < 0.9:
			why = "the background is not beside the browser"
		case exactShare(img, panel, background) > 0.5:
			why = "no panel across the top"
		case share(img, page, white) < 0.8:
			why = "no browser page where its window is"
		default:
			return true
		}
		return false
	}) {
		t.Fatalf("the desktop does not look like the docs': %s (screenshot e2e-local-desktop.png; windows %s); its log:\n%s", why, windows(),
			e.sh(t, "looks", `tail -c 4000 "${XDG_STATE_HOME:-$HOME/.local/state}/froog-desktop/desktop.log"`))
	}
}

// exactShare is the part of a rectangle of img within 10 a channel of
// colour c: XFCE's dark panel is within share's 40 of the background.
func exactShare(img image.Image, r image.Rectangle, c [3]uint8) float64 {
	r = r.Intersect(img.Bounds())
	n, in := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 4 {
			n++
			p := rgb(img, x, y)
			if d := [3]int{int(p[0]) - int(c[0]), int(p[1]) - int(c[1]), int(p[2]) - int(c[2])}; max(d[0], -d[0], d[1], -d[1], d[2], -d[2]) <= 10 {
				in++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(in) / float64(n)
}
