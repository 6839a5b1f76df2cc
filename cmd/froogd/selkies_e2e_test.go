package main_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The fast stream through the real binary where the sandbox has no
// Selkies (as on this build machine): the page's /stream websocket
// starts the desktop with froog-desktop start --selkies-token-stdin over
// the tunnel, which answers "transport":"vnc", and the edge closes the
// stream with no_stream (4005), the page's cue to use VNC; the token
// froog-desktop got is in no log line and no argv.
func TestStreamFallbackThroughTheEdge(t *testing.T) {
	if _, err := exec.LookPath("Xvnc"); err != nil {
		t.Skip("Xvnc is not installed (deploy/testdeps.sh installs it)")
	}
	if _, err := exec.LookPath("selkies"); err == nil {
		t.Skip("selkies is installed on this machine: the sandbox would have it")
	}
	data := t.TempDir()
	p, m := start(t, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), "dev", "--data", data,
		"--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test")
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	t.Cleanup(func() { c.call("POST", "/v1/sandboxes/fast/exec", `{"command": "froog-desktop stop"}`, 200, nil) })
	c.call("POST", "/v1/sandboxes", `{"name": "fast"}`, 202, nil)
	runs(t, c, "fast")
	var link struct{ URL string }
	c.call("POST", "/v1/sandboxes/fast/desktop", "", 201, &link)
	u, err := url.Parse(link.URL)
	if err != nil || !strings.HasPrefix(u.Fragment, "dt_") {
		t.Fatalf("link %q", link.URL)
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(data, "ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	edge := m[2]
	dial := func(ctx context.Context, n, _ string) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, n, edge) }
	web := &http.Client{Transport: &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("POST", "https://"+u.Host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q}`, u.Fragment)))
	req.Header.Set("Origin", "https://"+u.Host)
	req.Header.Set("Content-Type", "application/json")
	res, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var cookie string
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-froog_desktop" {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	if cookie == "" {
		t.Fatalf("no session cookie: %d", res.StatusCode)
	}
	d := websocket.Dialer{NetDialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}}
	ws, wres, err := d.Dial("wss://"+u.Host+"/stream", http.Header{"Origin": {"https://" + u.Host}, "Cookie": {cookie}})
	if err != nil {
		t.Fatalf("stream websocket: %v (%v)", err, wres)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4005 || ce.Text != "no_stream" {
		t.Fatalf("the stream ended with %v; want close 4005 no_stream", err)
	}
	// The desktop runs, on VNC.
	var st struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/fast/exec", `{"command": "froog-desktop status"}`, 200, &st)
	var status struct {
		Running   bool
		Transport string
	}
	if json.Unmarshal([]byte(st.Stdout), &status) != nil || !status.Running || status.Transport != "vnc" {
		t.Fatalf("froog-desktop status: %q", st.Stdout)
	}
	// The sandbox's copy of the token is the edge's secret: not in the
	// edge's log.
	var tok struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/fast/exec", `{"command": "cat ${XDG_STATE_HOME:-$HOME/.local/state}/froog-desktop/desktop.selkies-token"}`, 200, &tok)
	if len(tok.Stdout) < 40 {
		t.Fatalf("froog-desktop kept no token: %q", tok.Stdout)
	}
	if strings.Contains(p.stderr.String(), strings.TrimSpace(tok.Stdout)) {
		t.Errorf("the master token is in froogd's log")
	}
}
