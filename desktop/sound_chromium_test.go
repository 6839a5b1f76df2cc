package desktop

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/guest"
	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// opusTone is a second of a sine of hz as froog-desktop's sound server
// sends it: Opus packets (20 ms, 48 kHz stereo) from ffmpeg's libopus,
// taken out of Ogg by guest.OggPackets, without the two header packets.
func opusTone(t *testing.T, hz int) [][]byte {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency="+strconv.Itoa(hz)+":sample_rate=48000:duration=1",
		"-ac", "2", "-c:a", "libopus", "-b:a", "64k", "-frame_duration", "20", "-f", "ogg", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}
	var ps [][]byte
	if err := guest.OggPackets(bytes.NewReader(out), func(p []byte) error { ps = append(ps, bytes.Clone(p)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ps) < 40 {
		t.Fatalf("%d packets from ffmpeg", len(ps))
	}
	return ps[2:]
}

// The sound in headless Chromium beside either transport: a view-only
// page showing the fast stream (fakeSelkies' JPEG), and one on VNC,
// unmute; each decodes the sandbox's 440 Hz (Opus from ffmpeg, through
// the edge's /audio) at 440 Hz ±5 %, and the screen stays on its
// transport. The sound is the side channel's on both: froog keeps
// Selkies' own audio off.
func TestSoundChromium(t *testing.T) {
	testdep.Short(t, "drives Chromium")
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		testdep.Missing(t, "ffmpeg is not installed (deploy/testdeps.sh installs it)")
	}
	snd := newFakeSoundServer(t, opusTone(t, 440)).port()
	vnc := newFakeRFB(t, [3]byte{255, 0, 255})
	actx := browser.Start(t, 800, 500)
	master := SelkiesMaster(testKey, viewA.ID, viewA.Kind)

	for _, c := range []struct{ name, query, status string }{
		{"fast stream", "", `connected · JPEG · \d+ fps · view only`},
		{"vnc", "?transport=vnc", `connected · VNC · \d+ fps · view only`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := newFakeSelkies(t, master, fakeGreen)
			h, ss := newStreamHarness(t, viewA, vnc.port(), fake.port())
			ss.audio = snd
			ctx, cancel := chromedp.NewContext(actx)
			defer cancel()
			ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/"+c.query+"#"+h.link(true))); err != nil {
				t.Fatal(err)
			}
			str := func(js string) string { s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](js)); return s }
			want := regexp.MustCompile(c.status)
			wait.For(t, 20*time.Second, "the page to show the desktop ("+c.status+")", func() bool {
				return want.MatchString(str(`document.getElementById('st-conn').textContent`))
			})
			if err := chromedp.Do(ctx, chromedp.Click("#sound-button")); err != nil {
				t.Fatal(err)
			}
			var s struct {
				Packets        int
				Frequency, RMS float64
			}
			if !wait.Until(20*time.Second, func() bool {
				json.Unmarshal([]byte(str(`JSON.stringify(document.getElementById('status').sound())`)), &s)
				return s.Packets > 50 && s.RMS > 0.05 && math.Abs(s.Frequency-440) <= 22
			}) {
				t.Fatalf("the page never decoded 440 Hz: %+v; status %q", s, str(`document.getElementById('status').textContent`))
			}
			t.Logf("%s: %.1f Hz decoded, rms %.2f, %d packets; status %q", c.name, s.Frequency, s.RMS, s.Packets, str(`document.getElementById('st-conn').textContent`))
			if !want.MatchString(str(`document.getElementById('st-conn').textContent`)) {
				t.Errorf("the screen's transport changed with the sound: %q", str(`document.getElementById('st-conn').textContent`))
			}
		})
	}
	// The page's pitch of half a second of a 440 Hz tone stays 440 Hz
	// through what a loaded machine does to it: an underrun's silence, a
	// click, a few samples lost; silence has none.
	t.Run("pitch", func(t *testing.T) {
		h := newHarness(t, viewA, vnc.port())
		ctx, cancel := chromedp.NewContext(actx)
		defer cancel()
		ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+PathAssets+"sound.js")); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`import('`+PathAssets+`sound.js').then(({ pitch }) => {
			const rate = 48000, tone = (n, from = 0) => Float32Array.from({ length: n }, (_, i) => 0.3 * Math.sin(2 * Math.PI * 440 * (from + i) / rate));
			const clean = tone(rate / 2);
			const gap = tone(rate / 2); gap.fill(0, 8000, 8000 + rate / 10);
			const clicks = tone(rate / 2); for (let i = 1000; i < clicks.length; i += 2400) { clicks[i] = -1; clicks[i + 1] = 1; }
			const lost = new Float32Array(rate / 2); lost.set(tone(9000)); lost.set(tone(rate / 2 - 9000, 9037), 9000);
			return { clean: pitch(clean, rate).frequency, gap: pitch(gap, rate).frequency, clicks: pitch(clicks, rate).frequency,
				lost: pitch(lost, rate).frequency, silence: pitch(new Float32Array(rate / 2), rate).frequency };
		})`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"clean", "gap", "clicks", "lost"} {
			if f, ok := got[c]; !ok || math.Abs(f-440) > 5 {
				t.Errorf("%s: %.1f Hz, want 440 ± 5", c, f)
			}
		}
		if got["silence"] != 0 {
			t.Errorf("silence: %.1f Hz, want 0", got["silence"])
		}
		t.Logf("%v", got)
	})
}
