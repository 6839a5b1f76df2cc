// Command selkiesfake stands in for Selkies (the commit desktop/selkies.go
// pins) inside a sandbox of the end-to-end tests, installed as "selkies"
// on the sandbox's PATH: it takes Selkies' flags (--addr, --port; the
// rest are ignored) and its master token from SELKIES_MASTER_TOKEN, and
// serves /api/health, POST /api/tokens behind "Bearer MASTER" and
// /api/websockets?token=T as Selkies' secure mode does: AUTH_SUCCESS with
// the token's role, MODE websockets, and after the client's SETTINGS a
// JPEG stripe (0x03) of a teal screen every 100 ms. It appends what it
// hears to $HOME/selkiesfake.log, one line each: "args ARGS", "tokens
// N", "ROLE TEXT", "binary ROLE", so that the test can read it.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

var (
	mu     sync.Mutex
	tokens = map[string]string{}
	logf   *os.File
)

func logLine(s string) {
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintln(logf, strings.ReplaceAll(s, "\n", " "))
}

func main() {
	addr, port := "0.0.0.0", "8080"
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--addr="); ok {
			addr = v
		}
		if v, ok := strings.CutPrefix(a, "--port="); ok {
			port = v
		}
	}
	master := os.Getenv("SELKIES_MASTER_TOKEN")
	var err error
	logf, err = os.OpenFile(filepath.Join(os.Getenv("HOME"), "selkiesfake.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	logLine("args " + strings.Join(os.Args[1:], " "))
	frame := stripe(color.RGBA{0, 200, 200, 255})

	http.HandleFunc("GET /api/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("OK")) })
	http.HandleFunc("POST /api/tokens", func(w http.ResponseWriter, r *http.Request) {
		if master == "" || r.Header.Get("Authorization") != "Bearer "+master {
			logLine("tokens refused")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		var table map[string]struct{ Role string }
		if err := json.NewDecoder(r.Body).Decode(&table); err != nil {
			http.Error(w, "Bad Request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		tokens = map[string]string{}
		for t, p := range table {
			tokens[t] = p.Role
		}
		mu.Unlock()
		logLine(fmt.Sprintf("tokens %d", len(table)))
		w.Write([]byte("OK"))
	})
	up := websocket.Upgrader{}
	http.HandleFunc("GET /api/websockets", func(w http.ResponseWriter, r *http.Request) {
		tok := r.URL.Query().Get("token")
		if tok == "" {
			http.Error(w, "Token missing in secure mode", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		mu.Lock()
		role, ok := tokens[tok]
		mu.Unlock()
		if !ok {
			c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "Invalid authentication token"), time.Now().Add(time.Second))
			return
		}
		var wmu sync.Mutex
		send := func(mt int, b []byte) error {
			wmu.Lock()
			defer wmu.Unlock()
			return c.WriteMessage(mt, b)
		}
		send(websocket.TextMessage, []byte(`AUTH_SUCCESS,{"role":"`+role+`","slot":null}`))
		send(websocket.TextMessage, []byte("MODE websockets"))
		send(websocket.TextMessage, []byte(`{"type":"stream_resolution","width":64,"height":48,"displayId":"primary"}`))
		streaming := false
		done := make(chan struct{})
		defer close(done)
		for {
			mt, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if mt != websocket.TextMessage {
				logLine("binary " + role)
				continue
			}
			logLine(role + " " + string(b))
			if strings.HasPrefix(string(b), "SETTINGS,") && !streaming {
				streaming = true
				go func() {
					for id := 0; ; id++ {
						select {
						case <-done:
							return
						case <-time.After(100 * time.Millisecond):
						}
						f := bytes.Clone(frame)
						f[2], f[3] = byte(id>>8), byte(id)
						if send(websocket.BinaryMessage, f) != nil {
							return
						}
					}
				}()
			}
		}
	})
	if err := http.ListenAndServe(addr+":"+port, nil); err != nil {
		logLine("listen: " + err.Error())
		os.Exit(1)
	}
}

// stripe is the whole 64x48 screen as one 0x03 message: [0x03, 0, frame
// id, stripe y 0] and a JPEG.
func stripe(c color.RGBA) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, 255
	}
	var b bytes.Buffer
	b.Write([]byte{0x03, 0, 0, 0, 0, 0})
	jpeg.Encode(&b, img, &jpeg.Options{Quality: 95})
	return b.Bytes()
}
