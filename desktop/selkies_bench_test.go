//go:build bench

package desktop

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration { return testkit.CPUTime(os.Getpid()) }

// BenchmarkStreamRelay is the edge's cost per stream: fakeSelkies sends
// 64 KiB H.264-sized messages (0x04) as fast as the viewers take them,
// read by 1 or 3 viewers either straight from the stand-in ("direct") or
// through the edge's handler over TLS ("edge"). Every iteration is one
// message delivered to every viewer; cpu-µs/msg is the whole process's
// CPU (stand-in, viewers and, for "edge", the edge) per message, so the
// edge's own cost is the difference between the two.
func BenchmarkStreamRelay(b *testing.B) {
	frame := make([]byte, 64<<10)
	rand.Read(frame)
	frame[0], frame[1] = 0x04, 0
	for _, viewers := range []int{1, 3} {
		for _, path := range []string{"direct", "edge"} {
			b.Run(fmt.Sprintf("%s/viewers=%d", path, viewers), func(b *testing.B) {
				master := SelkiesMaster(testKey, viewA.ID, viewA.Kind)
				fake := newFakeSelkies(b, master, fakeGreen)
				fake.feed = make(chan []byte)
				defer close(fake.feed)
				defer fake.close()
				var dial func(i int) (*websocket.Conn, error)
				if path == "direct" {
					ctl, _ := selkiesTokens(master)
					if err := provisionSelkies(b.Context(), (&net.Dialer{}).DialContext, fake.port(), master); err != nil {
						b.Fatal(err)
					}
					dial = func(int) (*websocket.Conn, error) {
						ws, _, err := websocket.DefaultDialer.Dial("ws://127.0.0.1:"+strconv.Itoa(fake.port())+"/api/websockets?token="+ctl, nil)
						return ws, err
					}
				} else {
					h, _ := newStreamHarness(b, viewA, 1, fake.port())
					var cookies []*http.Cookie
					for range viewers {
						_, c := h.exchange(h.link(false), false)
						cookies = append(cookies, c)
					}
					dial = func(i int) (*websocket.Conn, error) {
						ws, _, err := h.dialStream(cookies[i], "?viewonly="+strconv.Itoa(min(i, 1)))
						return ws, err
					}
				}
				done := make(chan int64, viewers)
				for i := range viewers {
					ws, err := dial(i)
					if err != nil {
						b.Fatal(err)
					}
					defer ws.Close()
					ws.WriteMessage(websocket.TextMessage, []byte(`SETTINGS,{"displayId":"primary"}`))
					go func() {
						var n, bytes int64
						for n < int64(b.N) {
							mt, m, err := ws.ReadMessage()
							if err != nil {
								break
							}
							if mt == websocket.BinaryMessage && len(m) == len(frame) {
								n++
								bytes += int64(len(m))
							}
						}
						done <- bytes
					}()
				}
				wait.Until(10*time.Second, func() bool {
					fake.mu.Lock()
					defer fake.mu.Unlock()
					return len(fake.watchers) == viewers
				})
				b.SetBytes(int64(len(frame) * viewers))
				cpu0 := cpuTime()
				b.ResetTimer()
				for range b.N {
					fake.feed <- frame
				}
				for range viewers {
					<-done
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
			})
		}
	}
}

// BenchmarkStreamVsVNC compares the two transports on the same
// full-screen motion: ffmpeg plays a scrolling test picture full-screen on
// an Xvnc display (SDL), which the stand-in's encoder (x11grab → libx264,
// 30 fps) and Xvnc's own VNC server both send; headless Chromium shows it
// through the edge's handler, once over the stream and once over VNC
// (noVNC, Tight, quality 6). Over a 5 s window it reports the frames a
// second the page drew, the data rate it received, and this process's
// CPU (the edge; for the stream also the stand-in's relay and its
// reading of ffmpeg's output) as a share of one core.
func BenchmarkStreamVsVNC(b *testing.B) {
	const w, h, fps = 640, 360, 30
	vncPort, display := xDesktop(b, w, h, "#000000")
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		b.Skip("ffmpeg is not installed")
	}
	motion := exec.Command("ffmpeg", "-loglevel", "error", "-re", "-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=%d", w, h, fps),
		"-vf", "scroll=horizontal=0.004", "-f", "sdl", "-window_fullscreen", "1", "motion")
	motion.Env = append(os.Environ(), "DISPLAY="+display)
	if err := motion.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { motion.Process.Kill(); motion.Wait() }()
	fake := newFakeSelkies(b, SelkiesMaster(testKey, viewA.ID, viewA.Kind), fakeGreen)
	fake.w, fake.h = w, h
	x264Source(b, display, w, h, fps, fake)
	hs, _ := newStreamHarness(b, viewA, vncPort, fake.port())

	actx := browser.Start(b, 1000, 600)
	for _, c := range []struct{ name, query, status string }{
		{"selkies-h264", "", "H.264"},
		{"vnc", "?transport=vnc", "VNC"},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx, cancel := chromedp.NewContext(actx)
			defer cancel()
			ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.Navigate(hs.ts.URL+"/"+c.query+"#"+hs.link(false))); err != nil {
				b.Fatal(err)
			}
			// The page's counts so far: pictures drawn, bytes received.
			stat := func() (frames, bytes float64, line string) {
				v, _ := chromedp.Run(ctx, chromedp.Evaluate[[]any](`(() => { const s = document.getElementById('status'), c = s.counts();
					return [c.frames, c.bytes, s.textContent]; })()`))
				if len(v) == 3 {
					frames, _ = v[0].(float64)
					bytes, _ = v[1].(float64)
					line, _ = v[2].(string)
				}
				return
			}
			if !wait.Until(30*time.Second, func() bool { f, _, l := stat(); return f > 0 && strings.Contains(l, c.status) }) {
				_, _, l := stat()
				b.Fatalf("no %s frames: %q", c.status, l)
			}
			time.Sleep(3 * time.Second) // past the first frames and any backlog
			b.ResetTimer()
			frames0, bytes0, _ := stat()
			fake.mu.Lock()
			sent0 := fake.framesSent
			fake.mu.Unlock()
			cpu0, t0 := cpuTime(), time.Now()
			time.Sleep(5 * time.Second)
			frames1, bytes1, _ := stat()
			elapsed := time.Since(t0)
			cpu := cpuTime() - cpu0
			b.StopTimer()
			b.ReportMetric((frames1-frames0)/elapsed.Seconds(), "fps")
			if c.name != "vnc" {
				fake.mu.Lock()
				b.ReportMetric(float64(fake.framesSent-sent0)/elapsed.Seconds(), "encoded-fps")
				fake.mu.Unlock()
			}
			b.ReportMetric((bytes1-bytes0)*8/elapsed.Seconds()/1e3, "kbit/s")
			b.ReportMetric(100*cpu.Seconds()/elapsed.Seconds(), "edge-cpu-%")
		})
	}
}
