//go:build bench

package e2e_test

import (
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// TestDesktopSoundBench measures the desktop's sound (make bench;
// FROOG_BENCH=1) with the real binary and the local driver, whose
// sandbox is this machine: a player in this process writes to the
// desktop's PulseAudio (pacat), silence with bursts of a 440 Hz tone,
// 200 ms each second; a
// reference recorder here (parec, 10 ms latency asked, on the sink's
// monitor, as the sandbox's encoder reads it) notes when each burst
// leaves the sink — when a speaker on the guest would play it — and a
// headless Chromium page that unmuted notes when it starts in its
// decoded samples. Results in .bench/sound.json:
//
//   - latency, guest → page: from the burst heard on the sink's monitor
//     to the page decoding it (both clocks are this machine's), median
//     and range over the bursts; the page then plays it its lead (60 ms)
//     later, plus the audio output's own latency. How long a program's
//     own buffer holds its sound before the sink plays it is the
//     program's (pacat's here varied from 10 to 300 ms between runs) and
//     is not counted;
//   - CPU per listener: froogd dev's CPU (the edge, and the local
//     driver's in-process SSH server: the tunnel's sandbox side) with 1,
//     10 and 50 listeners (Go websocket clients reading /audio as the page
//     does), a tone playing, less its rate with nobody listening; and the
//     sandbox's encoder (ffmpeg) and PulseAudio, which the fan-out keeps
//     at one encoder whatever the number of listeners.
func TestDesktopSoundBench(t *testing.T) {
	// Alone: a benchmark; it measures CPU time, which other tests would share.
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (FROOG_BENCH=1)")
	}
	for _, bin := range []string{"Xvnc", "chromium", "pulseaudio", "pacat", "ffmpeg"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed (deploy/testdeps.sh installs it)", bin)
		}
	}
	be := startBenchEdge(t, 0)
	e := &deskEnv{c: be.c, edge: be.edge, pool: be.pool, web: be.web(nil, false)}
	e.sandbox(t, "sound")
	pulse := e.soundOf(t, "sound")
	p := startPlayer(t, pulse)
	ref := startMonitor(t, pulse)

	// Latency: bursts of 200 ms every second, into a page that listens.
	ctx := e.browser(t, 1000, 700)
	openViewer(t, ctx, e.link(t, "sound", "desktop", ""))
	if err := chromedp.Do(ctx, chromedp.Click("#sound-button")); err != nil {
		t.Fatal(err)
	}
	var st soundStats
	stats := func() soundStats {
		var s soundStats
		b, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(document.getElementById('status').sound())`))
		json.Unmarshal([]byte(b), &s)
		return s
	}
	wait.For(t, time.Minute, "the page to receive sound", func() bool { st = stats(); return st.Packets > 25 })
	const bursts = 15
	for range bursts {
		p.burst(200 * time.Millisecond)
		time.Sleep(time.Second)
	}
	st = stats()
	var lat []float64
	var prev time.Time
	for _, t0 := range ref.heard() {
		if t0.Sub(prev) < 500*time.Millisecond { // a gap within a burst (an underrun), not a burst
			continue
		}
		prev = t0
		ms := float64(t0.UnixNano()) / 1e6
		for _, on := range st.Onsets {
			if on >= ms {
				if d := on - ms; d < 500 {
					lat = append(lat, d)
				}
				break
			}
		}
	}
	if len(lat) < bursts*2/3 {
		t.Fatalf("the page saw %d of %d bursts (onsets %v)", len(lat), bursts, st.Onsets)
	}
	slices.Sort(lat)
	var lead struct{ Lead, OutputLatency float64 }
	b, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(document.getElementById('status').sound())`))
	json.Unmarshal([]byte(b), &lead)
	med := lat[len(lat)/2]
	t.Logf("latency guest → page (decoded): median %.0f ms [%.0f–%.0f] over %d bursts; played %.0f ms later (lead) + output latency %.0f ms",
		med, lat[0], lat[len(lat)-1], len(lat), 1000*lead.Lead, 1000*lead.OutputLatency)
	chromedp.Run(ctx, chromedp.Click("#sound-button")) // mute: the Go listeners below are all there is
	wait.For(t, 10*time.Second, "the page's stream to end", func() bool { return encodersOf(pulse) == 0 })

	// CPU per listener, a tone playing throughout.
	u, _ := url.Parse(e.link(t, "sound", "desktop?viewonly=1", ""))
	cookie := be.session(t, be.web(nil, false), u.Host, u.Fragment)
	p.tone(true)
	const each = 8 * time.Second
	measure := func(n int) (edge, enc, pa float64, got int64, took float64) {
		var ls []*websocket.Conn
		var packets atomic.Int64
		var wg sync.WaitGroup
		for range n {
			ws, err := soundListener(be, u.Host, cookie)
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, ws)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if _, _, err := ws.ReadMessage(); err != nil {
						return
					}
					packets.Add(1)
				}
			}()
		}
		if n > 0 {
			wait.For(t, 30*time.Second, "every listener to hear", func() bool { return packets.Load() >= int64(5*n) })
			if k := encodersOf(pulse); k != 1 {
				t.Fatalf("%d encoders for %d listeners, want 1", k, n)
			}
		}
		encs, pas := soundPids(pulse)
		c0, e0, a0, p0, w0, began := testkit.CPUTime(be.pid()), testkit.CPUTime(encs...), testkit.CPUTime(pas...), packets.Load(), p.written.Load(), time.Now()
		// The player's samples are the clock: each's worth of them written.
		wait.For(t, 3*each, "the player to play "+each.String(), func() bool { return p.written.Load()-w0 >= int64(each/(10*time.Millisecond)) })
		took = time.Since(began).Seconds()
		edge, got = (testkit.CPUTime(be.pid())-c0).Seconds()/took, packets.Load()-p0
		enc, pa = (testkit.CPUTime(encs...)-e0).Seconds()/took, (testkit.CPUTime(pas...)-a0).Seconds()/took
		for _, ws := range ls {
			ws.Close()
		}
		wg.Wait()
		wait.For(t, 10*time.Second, "the encoder to end with the listeners", func() bool { return encodersOf(pulse) == 0 })
		return edge, enc, pa, got, took
	}
	type round struct {
		Listeners      int     `json:"listeners"`
		EdgeCores      float64 `json:"froogd_cpu_cores"`
		EncoderCores   float64 `json:"encoder_cpu_cores"`
		PulseCores     float64 `json:"pulseaudio_cpu_cores"`
		PacketsPerS    float64 `json:"packets_per_s_per_listener"`
		EdgeUsPerPktLn float64 `json:"froogd_cpu_us_per_packet_per_listener"`
	}
	idle, _, idlePA, _, _ := measure(0)
	var rounds []round
	for _, n := range []int{1, 10, 50} {
		edge, enc, pa, got, took := measure(n)
		r := round{Listeners: n, EdgeCores: edge, EncoderCores: enc, PulseCores: pa, PacketsPerS: float64(got) / took / float64(n)}
		r.EdgeUsPerPktLn = 1e6 * (edge - idle) * took / float64(max(got, 1))
		rounds = append(rounds, r)
		t.Logf("%2d listeners: froogd %.4f cores (%.2f %% of a core per listener above idle, %.0f µs per packet per listener); in the sandbox the encoder %.4f cores, pulseaudio %.4f (%.4f with nobody listening); %.1f packets/s each",
			n, edge, 100*(edge-idle)/float64(n), r.EdgeUsPerPktLn, enc, pa, idlePA, r.PacketsPerS)
	}
	last := rounds[len(rounds)-1]
	perListener := (last.EdgeCores - rounds[0].EdgeCores) / float64(last.Listeners-rounds[0].Listeners)
	t.Logf("froogd CPU per added listener: %.2f %% of a core (from %d to %d listeners); the sandbox's encoder: %.2f %% of a core, whatever the number",
		100*perListener, rounds[0].Listeners, last.Listeners, 100*last.EncoderCores)
	writeBench(t, "sound.json", map[string]any{
		"machine":                     machine(),
		"latency_ms_median":           med,
		"latency_ms_range":            [2]float64{lat[0], lat[len(lat)-1]},
		"latency_bursts":              len(lat),
		"page_lead_ms":                1000 * lead.Lead,
		"page_output_latency_ms":      1000 * lead.OutputLatency,
		"latency_counted":             "from a 440 Hz burst heard on the desktop's sink monitor (parec, 10 ms latency asked, in the test) to the page's first decoded 20 ms chunk loud with it (epoch ms, this machine's clock on both sides); the page plays it page_lead_ms later, plus its output's latency; a program's own buffering before the sink is not counted",
		"froogd_idle_cores":           idle,
		"rounds":                      rounds,
		"froogd_cores_per_listener":   perListener,
		"encoder_cores":               last.EncoderCores,
		"pulseaudio_idle_cores":       idlePA,
		"cpu_counted":                 "utime+stime from /proc: froogd dev (the edge, and the local driver's in-process SSH server, the tunnel's sandbox side) and, in the sandbox, the encoder (ffmpeg) and the screen's pulseaudio (which also serves this test's player and reference recorder); each round " + each.String() + " with a tone playing",
		"froogd_cpu_per_listener_how": "the froogd rate's growth from 1 to 50 listeners, divided by 49",
	})
}

// monitor records a PulseAudio server's sink monitor (parec) and notes
// when sound starts after silence, 10 ms chunk by chunk.
type monitor struct {
	mu     sync.Mutex
	onsets []time.Time
}

func startMonitor(t *testing.T, pulse string) *monitor {
	cmd := exec.Command("parec", "--raw", "--format=s16le", "--rate=48000", "--channels=2", "--latency-msec=10", "-d", "froog.monitor")
	cmd.Env = append(os.Environ(), "PULSE_SERVER="+pulse)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	m := &monitor{}
	go func() {
		buf, loud := make([]byte, 1920), false
		for {
			if _, err := io.ReadFull(out, buf); err != nil {
				return
			}
			peak := 0
			for i := 0; i < len(buf); i += 2 {
				v := int(int16(binary.LittleEndian.Uint16(buf[i:])))
				peak = max(peak, v, -v)
			}
			if !loud && peak > 8000 {
				m.mu.Lock()
				m.onsets = append(m.onsets, time.Now())
				m.mu.Unlock()
			}
			loud = peak > 500
		}
	}()
	return m
}

func (m *monitor) heard() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.onsets)
}

// player writes to a PulseAudio server through pacat in real time, 10 ms
// at a time: silence, or a 440 Hz sine (amplitude 0.5) while on.
type player struct {
	in     io.WriteCloser
	mu     sync.Mutex
	until  time.Time // a burst's end
	always bool
	began  chan time.Time // when a burst's first samples were written

	written atomic.Int64 // 10 ms chunks written
}

func startPlayer(t *testing.T, pulse string) *player {
	cmd := exec.Command("pacat", "--raw", "--format=s16le", "--rate=48000", "--channels=2", "--latency-msec=30")
	cmd.Env = append(os.Environ(), "PULSE_SERVER="+pulse)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &player{in: in, began: make(chan time.Time, 1)}
	done := make(chan struct{})
	go p.run(done)
	t.Cleanup(func() { close(done); in.Close(); cmd.Wait() })
	return p
}

func (p *player) run(done chan struct{}) {
	const n = 480 // 10 ms
	buf := make([]byte, 4*n)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	phase, was := 0, false
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		on := p.always || time.Now().Before(p.until)
		p.mu.Unlock()
		for i := range n {
			v := int16(0)
			if on {
				v = int16(16383 * math.Sin(2*math.Pi*440*float64(phase)/48000))
				phase++
			}
			binary.LittleEndian.PutUint16(buf[4*i:], uint16(v))
			binary.LittleEndian.PutUint16(buf[4*i+2:], uint16(v))
		}
		if on && !was {
			select {
			case p.began <- time.Now():
			default:
			}
		}
		was = on
		if _, err := p.in.Write(buf); err != nil {
			return
		}
		p.written.Add(1)
	}
}

// burst plays the tone for d and returns when its first samples were
// written.
func (p *player) burst(d time.Duration) time.Time {
	p.mu.Lock()
	p.until = time.Now().Add(d)
	p.mu.Unlock()
	return <-p.began
}

// tone plays the tone until told otherwise.
func (p *player) tone(on bool) {
	p.mu.Lock()
	p.always = on
	p.mu.Unlock()
}

// soundListener opens /audio on host with the session cookie, as the
// page does once unmuted.
func soundListener(e *benchEdge, host, cookie string) (*websocket.Conn, error) {
	d := websocket.Dialer{NetDialContext: e.dial(nil), TLSClientConfig: &tls.Config{RootCAs: e.pool, NextProtos: []string{"http/1.1"}},
		HandshakeTimeout: 30 * time.Second}
	ws, res, err := d.Dial("wss://"+host+"/audio", http.Header{"Origin": {"https://" + host}, "Cookie": {cookie}})
	if err != nil {
		return nil, fmt.Errorf("sound websocket: %w (%v)", err, res)
	}
	return ws, nil
}

// soundPids are the sandbox's sound processes for pulse: the encoders
// (ffmpeg) and the screen's pulseaudio (whose socket is pulse's).
func soundPids(pulse string) (encoders, pulseaudio []int) {
	sock := strings.TrimPrefix(pulse, "unix:")
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, _ := os.ReadFile(d)
		s := string(b)
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		switch {
		case err != nil:
		case strings.HasPrefix(s, "ffmpeg\x00") && strings.Contains(s, "\x00"+pulse+"\x00"):
			encoders = append(encoders, pid)
		case strings.Contains(s, "socket="+sock+" "):
			pulseaudio = append(pulseaudio, pid)
		}
	}
	return encoders, pulseaudio
}
