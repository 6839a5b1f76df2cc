package desktop

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

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
