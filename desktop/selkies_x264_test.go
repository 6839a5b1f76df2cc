package desktop

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image/color"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

func paint(t testing.TB, display, colour string) {
	t.Helper()
	if out, err := exec.Command("xsetroot", "-display", display, "-solid", colour).CombinedOutput(); err != nil {
		t.Fatalf("xsetroot: %v: %s", err, out)
	}
}

// x264Source is the stand-in's encoder: Debian's ffmpeg grabs the X
// display (x11grab) and encodes it with libx264 (Baseline, zero latency,
// an access unit delimiter before every picture) to Annex B; each access
// unit goes to the stand-in's watchers (publish) as Selkies' 0x04
// message — keyframe flag, frame id, stripe 0, the screen's size. It
// skips where ffmpeg is missing.
func x264Source(t testing.TB, display string, w, h, fps int, f *fakeSelkies) {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		testdep.Missing(t, "ffmpeg is not installed (deploy/testdeps.sh installs it)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ffmpeg", "-loglevel", "error", "-f", "x11grab", "-framerate", fmt.Sprint(fps),
		"-video_size", fmt.Sprintf("%dx%d", w, h), "-draw_mouse", "0", "-i", display,
		"-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-profile:v", "baseline",
		"-pix_fmt", "yuv420p", "-g", fmt.Sprint(fps), "-x264-params", "aud=1", "-f", "h264", "-")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("ffmpeg said: %s", stderr.String())
		}
	})
	go func() {
		defer close(done)
		defer cmd.Wait()
		id := 0
		splitAccessUnits(out, func(au []byte, key bool) {
			hdr := []byte{0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			if key {
				hdr[1] = 1
			}
			binary.BigEndian.PutUint16(hdr[2:], uint16(id))
			binary.BigEndian.PutUint16(hdr[6:], uint16(w))
			binary.BigEndian.PutUint16(hdr[8:], uint16(h))
			id++
			f.publish(append(hdr, au...), key)
		})
	}()
}

// splitAccessUnits reads an Annex B stream whose access units begin with
// a delimiter (NAL type 9) and calls emit with each, and whether it holds
// an IDR slice (NAL type 5).
func splitAccessUnits(r io.Reader, emit func(au []byte, key bool)) {
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		// Access unit starts: a start code followed by an AUD.
		for {
			first := nextAUD(buf, 0)
			if first < 0 {
				break
			}
			next := nextAUD(buf, first+4)
			if next < 0 {
				buf = buf[first:]
				break
			}
			au := buf[first:next]
			emit(bytes.Clone(au), hasIDR(au))
			buf = buf[next:]
		}
		if err != nil {
			if len(buf) > 0 {
				emit(bytes.Clone(buf), hasIDR(buf))
			}
			return
		}
	}
}

// nextAUD is the offset of the next "00 00 01 09" (or its 4-byte start
// code) at or after from, or -1.
func nextAUD(b []byte, from int) int {
	for i := from; i+3 < len(b); i++ {
		if b[i] == 0 && b[i+1] == 0 && b[i+2] == 1 && b[i+3]&0x1f == 9 {
			if i > 0 && b[i-1] == 0 {
				return i - 1
			}
			return i
		}
	}
	return -1
}

func hasIDR(au []byte) bool {
	for i := 0; i+3 < len(au); i++ {
		if au[i] == 0 && au[i+1] == 0 && au[i+2] == 1 && au[i+3]&0x1f == 5 {
			return true
		}
	}
	return false
}

// The test of the page: a real X display encoded by a real H.264
// encoder (ffmpeg's x11grab and libx264) into the stand-in, through the
// edge's handler to headless Chromium, whose WebCodecs decodes it: the
// viewer's screenshot shows the display's colour, and its next colour
// once the display is painted again.
func TestViewerStreamX264Chromium(t *testing.T) {
	testdep.Short(t, "drives Chromium")
	orange, cyan := color.RGBA{255, 128, 0, 255}, color.RGBA{0, 200, 200, 255}
	vncPort, display := xDesktop(t, 320, 240, "#ff8000")
	fake := newFakeSelkies(t, SelkiesMaster(testKey, viewA.ID, viewA.Kind), orange)
	fake.w, fake.h = 320, 240
	x264Source(t, display, 320, 240, 30, fake)
	h, _ := newStreamHarness(t, viewA, vncPort, fake.port())

	art := filepath.Join("..", ".artefacts", "desktop")
	os.MkdirAll(art, 0o755)
	actx := browser.Start(t, 800, 500)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 150*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/#"+h.link(false))); err != nil {
		t.Fatal(err)
	}
	status := regexp.MustCompile(`connected · H\.264 · [1-9][0-9]* fps`)
	for _, c := range []struct {
		name   string
		paint  string
		colour color.RGBA
	}{
		{"stream-x264", "", orange},
		{"stream-x264-repainted", "#00c8c8", cyan},
	} {
		if c.paint != "" {
			paint(t, display, c.paint)
		}
		var shot []byte
		var line string
		// The page gives Selkies up to answerMs (60 s) to say its first
		// word, as the edge may be starting it: on a loaded machine the
		// first picture may take as long.
		within := 30 * time.Second
		if c.paint == "" {
			within = 75 * time.Second
		}
		ok := wait.Until(within, func() bool {
			line, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('status').textContent`))
			s, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				return false
			}
			shot = s
			return colourAt(shot, 0.5, 0.5, c.colour) && status.MatchString(line)
		})
		os.WriteFile(filepath.Join(art, c.name+".png"), shot, 0o644)
		if !ok {
			p, bad, enc, conns := fake.stats()
			t.Fatalf("%s: the page never showed %v over H.264 (status %q; the stand-in: %d provisions, %d bad, %d encodes, %d connections; screenshot in %s)",
				c.name, c.colour, line, p, bad, enc, conns, art)
		}
	}
}
