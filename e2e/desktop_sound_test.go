package e2e_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// needSound fails (under CI) or skips where the desktop's sound cannot
// run: PulseAudio, its pacat, and ffmpeg (the encoder and the tone).
func needSound(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"pulseaudio", "pacat", "ffmpeg"} {
		if _, err := exec.LookPath(bin); err != nil {
			testdep.Missing(t, "%s is not installed (deploy/testdeps.sh installs pulseaudio, pulseaudio-utils and ffmpeg)", bin)
		}
	}
}

// soundOf starts the sandbox's desktop and returns its PULSE_SERVER.
func (e *deskEnv) soundOf(t *testing.T, sandbox string) string {
	t.Helper()
	var st struct {
		PulseServer string `json:"pulse_server"`
		AudioPort   int    `json:"audio_port"`
	}
	out := e.sh(t, sandbox, "froog-desktop start --kind desktop")
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.PulseServer == "" || st.AudioPort == 0 {
		t.Fatalf("froog-desktop start: %q: no sound", out)
	}
	return st.PulseServer
}

// encodersOf counts the sound encoders (ffmpeg) capturing pulse: the
// local driver's sandbox runs on this machine, so its processes are in
// this /proc.
func encodersOf(pulse string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range dirs {
		b, _ := os.ReadFile(p)
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "ffmpeg" && strings.Contains(string(b), "\x00"+pulse+"\x00") {
			n++
		}
	}
	return n
}

// tone plays a sine of hz for seconds in the sandbox, as a program there
// would (ffmpeg makes it, pacat plays it to the desktop's PulseAudio);
// the job runs on while the test goes on. It returns the job's id.
func (e *deskEnv) tone(t *testing.T, sandbox, pulse string, hz, seconds float64) string {
	t.Helper()
	cmd := fmt.Sprintf("ffmpeg -loglevel error -f lavfi -i sine=frequency=%g:sample_rate=48000:duration=%g -ac 2 -f s16le - | "+
		"PULSE_SERVER=%s pacat --raw --format=s16le --rate=48000 --channels=2 --latency-msec=20", hz, seconds, pulse)
	body, _ := json.Marshal(map[string]string{"command": cmd})
	var job struct{ ID string }
	e.c.call("POST", "/v1/sandboxes/"+sandbox+"/jobs", string(body), 201, &job)
	return job.ID
}

// job is what the API says of a job: its state, exit code and output.
func (e *deskEnv) job(t *testing.T, sandbox, id string) string {
	t.Helper()
	var out struct {
		State    string
		ExitCode *int `json:"exit_code"`
		Output   string
	}
	e.c.call("GET", "/v1/sandboxes/"+sandbox+"/jobs/"+id, "", 200, &out)
	code := "none"
	if out.ExitCode != nil {
		code = strconv.Itoa(*out.ExitCode)
	}
	return fmt.Sprintf("job %s, exit code %s, output %.500q", out.State, code, out.Output)
}

// soundStats is the page's $('status').sound().
type soundStats struct {
	On        bool
	Packets   int
	Chunks    int
	Errors    int
	Frequency float64
	RMS       float64
	Onsets    []float64
}

// The desktop's sound in Chromium through the real binary: a view-only
// viewer is muted at first, and nothing is encoded in the sandbox; it
// unmutes (a click); a 440 Hz tone played in the sandbox is decoded in
// the page at 440 Hz (±5 %, the median time between upward zero
// crossings of the decoded samples); it mutes, and the sandbox's encoder
// ends.
func TestDesktopSoundInChromium(t *testing.T) {
	t.Parallel()
	needSound(t)
	e := devDesktop(t)
	e.sandbox(t, "snd")
	pulse := e.soundOf(t, "snd")
	ctx := e.browser(t, 1000, 700)
	openViewer(t, ctx, e.link(t, "snd", "desktop?viewonly=1", ""))
	stats := func() soundStats {
		t.Helper()
		var s soundStats
		b, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(document.getElementById('status').sound())`))
		if err != nil || json.Unmarshal([]byte(b), &s) != nil {
			t.Fatalf("the page's sound stats: %q, %v", b, err)
		}
		return s
	}
	if s := stats(); s.On || s.Packets != 0 {
		t.Fatalf("sound before the viewer unmuted: %+v", s)
	}
	if n := encodersOf(pulse); n != 0 {
		t.Fatalf("%d encoders run in the sandbox while nobody listens", n)
	}

	if err := chromedp.Do(ctx, chromedp.Click("#sound-button")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 60*time.Second, "the page to receive sound", func() bool { return stats().Packets > 10 })
	if n := encodersOf(pulse); n != 1 {
		t.Fatalf("%d encoders in the sandbox for one listener, want 1", n)
	}
	// The tone lasts as long as the wait for it (a loaded machine may
	// start its job late), and stops once heard.
	job := e.tone(t, "snd", pulse, 440, 40)
	var s soundStats
	if !wait.Until(30*time.Second, func() bool {
		s = stats()
		return s.RMS > 0.05 && math.Abs(s.Frequency-440) <= 22
	}) {
		s.Onsets = nil // not what went wrong
		t.Fatalf("the page never decoded a 440 Hz tone (±5 %%): last %+v; the tone's %s", s, e.job(t, "snd", job))
	}
	e.c.call("POST", "/v1/sandboxes/snd/jobs/"+job+"/stop", "", 200, nil)
	t.Logf("decoded in the page: %.1f Hz, rms %.2f, after %d packets (%d decoded chunks, %d errors)", s.Frequency, s.RMS, s.Packets, s.Chunks, s.Errors)
	if st, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('sound-button').getAttribute('aria-pressed')`)); st != "true" {
		t.Errorf("the sound button's aria-pressed is %q while on", st)
	}

	if err := chromedp.Do(ctx, chromedp.Click("#sound-button")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the sandbox's encoder to end when the page mutes", func() bool { return encodersOf(pulse) == 0 })
	if s := stats(); s.On {
		t.Fatalf("still on after the second click: %+v", s)
	}
}

// listen opens a view host's /audio with a session cookie, as an unmuted
// page does, and reads until it has want sound messages ([0x01, 0x00,
// Opus]) or within passes; it returns how many it read, and why it
// stopped short.
func (e *deskEnv) listen(t *testing.T, host, cookie string, want int, within time.Duration) (int, error) {
	t.Helper()
	ws := e.websocketAt(t, host, "/audio", cookie)
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(within))
	n := 0
	for n < want {
		mt, m, err := ws.ReadMessage()
		if err != nil {
			return n, fmt.Errorf("after %d sound messages: %w", n, err)
		}
		if mt != websocket.BinaryMessage || len(m) < 3 || m[0] != 0x01 || m[1] != 0 {
			return n, fmt.Errorf("sound message %d: type %d, % x…", n, mt, m[:min(len(m), 8)])
		}
		n++
	}
	return n, nil
}
