package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"image/jpeg"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// streamEdge is froogd dev with one running sandbox, and what a page of
// its desktop's view host does: exchange a link, open /stream.
type streamEdge struct {
	t      *testing.T
	p      *proc
	c      client
	sbx    string
	dialer websocket.Dialer
	web    *http.Client
}

// newStreamEdge starts froogd dev with path first on its PATH (and so on
// its sandboxes'), and a running sandbox named sbx.
func newStreamEdge(t *testing.T, sbx, path string) *streamEdge {
	t.Helper()
	if _, err := exec.LookPath("Xvnc"); err != nil {
		testdep.Missing(t, "Xvnc is not installed (deploy/testdeps.sh installs it)")
	}
	var o devOptions
	if path != "" {
		o.env = []string{"PATH=" + path + ":" + os.Getenv("PATH")}
	}
	d := startDev(t, o)
	e := &streamEdge{t: t, p: d.p, c: d.c, sbx: sbx}
	t.Cleanup(func() { e.c.call("POST", "/v1/sandboxes/"+sbx+"/exec", `{"command": "froog-desktop stop"}`, 200, nil) })
	e.c.call("POST", "/v1/sandboxes", `{"name": "`+sbx+`"}`, 202, nil)
	runs(t, e.c, sbx)
	pool, edge := d.pool, d.edge
	dial := func(ctx context.Context, n, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, n, edge)
	}
	e.web = &http.Client{Transport: &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	e.dialer = websocket.Dialer{NetDialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}}
	return e
}

// open makes a desktop link (view-only or not), exchanges it as the page
// does and opens the page's /stream websocket with the session cookie.
func (e *streamEdge) open(viewOnly bool) *websocket.Conn {
	e.t.Helper()
	var link struct{ URL string }
	e.c.call("POST", fmt.Sprintf("/v1/sandboxes/%s/desktop?viewonly=%d", e.sbx, map[bool]int{false: 0, true: 1}[viewOnly]), "", 201, &link)
	u, err := url.Parse(link.URL)
	if err != nil || !strings.HasPrefix(u.Fragment, "dt_") {
		e.t.Fatalf("link %q", link.URL)
	}
	req, _ := http.NewRequest("POST", "https://"+u.Host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q}`, u.Fragment)))
	req.Header.Set("Origin", "https://"+u.Host)
	req.Header.Set("Content-Type", "application/json")
	res, err := e.web.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	var cookie string
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-froog_desktop" {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	if cookie == "" {
		e.t.Fatalf("no session cookie: %d", res.StatusCode)
	}
	ws, wres, err := e.dialer.Dial("wss://"+u.Host+"/stream", http.Header{"Origin": {"https://" + u.Host}, "Cookie": {cookie}})
	if err != nil {
		e.t.Fatalf("stream websocket: %v (%v)", err, wres)
	}
	e.t.Cleanup(func() { ws.Close() })
	return ws
}

// exec runs a command in the sandbox and returns its stdout.
func (e *streamEdge) exec(command string) string {
	var out struct{ Stdout string }
	b, _ := json.Marshal(map[string]string{"command": command})
	e.c.call("POST", "/v1/sandboxes/"+e.sbx+"/exec", string(b), 200, &out)
	return out.Stdout
}

// The fast stream through the real binary where the sandbox has no
// Selkies (as on this build machine): the page's /stream websocket
// starts the desktop with froog-desktop start --selkies-token-stdin over
// the tunnel, which answers "transport":"vnc", and the edge closes the
// stream with no_stream (4005), the page's cue to use VNC; the token
// froog-desktop got is in no log line.
func TestStreamFallbackThroughTheEdge(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("selkies"); err == nil {
		t.Skip("selkies is installed on this machine: the sandbox would have it")
	}
	e := newStreamEdge(t, "fast", "")
	ws := e.open(false)
	ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4005 || ce.Text != "no_stream" {
		t.Fatalf("the stream ended with %v; want close 4005 no_stream", err)
	}
	var status struct {
		Running   bool
		Transport string
	}
	if out := e.exec("froog-desktop status"); json.Unmarshal([]byte(out), &status) != nil || !status.Running || status.Transport != "vnc" {
		t.Fatalf("froog-desktop status: %q", out)
	}
	tok := strings.TrimSpace(e.exec("cat ${XDG_STATE_HOME:-$HOME/.local/state}/froog-desktop/desktop.selkies-token"))
	if len(tok) < 40 {
		t.Fatalf("froog-desktop kept no token: %q", tok)
	}
	if strings.Contains(e.p.stderr.String(), tok) {
		t.Errorf("the master token is in froogd's log")
	}
}

// The fast stream through the real binary with a stand-in Selkies in the
// sandbox (testdata/selkiesfake, installed as "selkies" on its PATH): the
// edge has froog-desktop start it with the sandbox's master token (in its
// environment, not its arguments), provisions the viewer tokens with it,
// and carries the page's websocket through the tunnel — the page gets
// the stand-in's JPEG stripes of its teal screen as Selkies' controller;
// a view-only page is Selkies' viewer and its input never arrives; no
// Selkies credential is in the page's stream or froogd's log.
func TestStreamThroughTheEdge(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bin, "selkies"), "./testdata/selkiesfake").CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in: %v\n%s", err, out)
	}
	e := newStreamEdge(t, "quick", bin)

	ws := e.open(false)
	var seen bytes.Buffer
	read := func(ws *websocket.Conn, until func(mt int, b []byte) bool) {
		t.Helper()
		ws.SetReadDeadline(time.Now().Add(time.Minute))
		for {
			mt, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("stream: %v (so far %q)", err, seen.String())
			}
			seen.Write(b)
			if until(mt, b) {
				return
			}
		}
	}
	read(ws, func(mt int, b []byte) bool { return strings.HasPrefix(string(b), `AUTH_SUCCESS,{"role":"controller"`) })
	ws.WriteMessage(websocket.TextMessage, []byte(`SETTINGS,{"displayId":"primary"}`))
	read(ws, func(mt int, b []byte) bool {
		if mt != websocket.BinaryMessage || len(b) < 7 || b[0] != 0x03 {
			return false
		}
		img, err := jpeg.Decode(bytes.NewReader(b[6:]))
		if err != nil {
			t.Fatalf("stripe: %v", err)
		}
		r, g, bl, _ := img.At(32, 24).RGBA()
		if r>>8 > 40 || g>>8 < 160 || bl>>8 < 160 {
			t.Fatalf("the stripe's colour: %d %d %d, want teal", r>>8, g>>8, bl>>8)
		}
		return true
	})
	var status struct {
		Transport   string
		SelkiesPort int `json:"selkies_port"`
	}
	if out := e.exec("froog-desktop status"); json.Unmarshal([]byte(out), &status) != nil || status.Transport != "selkies" || status.SelkiesPort == 0 {
		t.Fatalf("froog-desktop status: %q", out)
	}

	watcher := e.open(true)
	read(watcher, func(mt int, b []byte) bool { return strings.HasPrefix(string(b), `AUTH_SUCCESS,{"role":"viewer"`) })
	for _, m := range []string{"kd,65", "m,1,1,1,0", "cw,aGk=", "cmd,xterm", "REQUEST_KEYFRAME"} {
		watcher.WriteMessage(websocket.TextMessage, []byte(m))
	}
	watcher.WriteMessage(websocket.BinaryMessage, []byte{0x02, 1, 2})
	ws.WriteMessage(websocket.TextMessage, []byte("kd,66"))
	var log string
	wait.For(t, 30*time.Second, "the watcher's keyframe request and the controller's key to arrive", func() bool {
		log = e.exec("cat $HOME/selkiesfake.log")
		return strings.Contains(log, "viewer REQUEST_KEYFRAME") && strings.Contains(log, "controller kd,66")
	})
	for _, bad := range []string{"viewer kd,", "viewer m,", "viewer cw,", "viewer cmd,", "binary viewer", "tokens refused"} {
		if strings.Contains(log, bad) {
			t.Errorf("the stand-in's log has %q:\n%s", bad, log)
		}
	}
	tok := strings.TrimSpace(e.exec("cat ${XDG_STATE_HOME:-$HOME/.local/state}/froog-desktop/desktop.selkies-token"))
	if len(tok) < 40 {
		t.Fatalf("froog-desktop kept no token: %q", tok)
	}
	if args := strings.SplitN(log, "\n", 2)[0]; !strings.HasPrefix(args, "args ") || strings.Contains(args, tok) ||
		!strings.Contains(args, "--mode=websockets") || !strings.Contains(args, "--addr=127.0.0.1") {
		t.Errorf("the stand-in's arguments: %q", args)
	}
	if strings.Contains(seen.String(), tok) || strings.Contains(e.p.stderr.String(), tok) {
		t.Errorf("the master token reached the page or froogd's log")
	}
}
