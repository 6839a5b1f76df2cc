package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"github.com/gorilla/websocket"
)

// A desktop through the real binary: froogd dev, the local driver, the
// desktop started in the sandbox on first open (froog-desktop over the
// tunnel), a link exchanged for a session, and a websocket bridged to the
// sandbox's VNC server — a VNC client reads the colour the sandbox painted
// its screen. A link for another sandbox, an expired token and a view
// host that is not the link's are refused.
func TestDesktopThroughTheEdge(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("Xvnc"); err != nil {
		testdep.Missing(t, "Xvnc is not installed (deploy/testdeps.sh installs it)")
	}
	fd := startDev(t, devOptions{})
	c := fd.c
	t.Cleanup(func() { c.call("POST", "/v1/sandboxes/desk/exec", `{"command": "froog-desktop stop"}`, 200, nil) })
	for _, name := range []string{"desk", "other"} {
		c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
		runs(t, c, name)
	}
	var link struct{ URL string }
	c.call("POST", "/v1/sandboxes/desk/desktop", "", 201, &link)
	u, err := url.Parse(link.URL)
	if err != nil || !strings.HasPrefix(u.Fragment, "dt_") {
		t.Fatalf("link %q", link.URL)
	}
	pool, edge := fd.pool, fd.edge
	tr := &http.Transport{DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, n, edge)
	},
		TLSClientConfig: &tls.Config{RootCAs: pool}}
	web := &http.Client{Transport: tr}
	exchange := func(host, token string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", "https://"+host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q}`, token)))
		req.Header.Set("Origin", "https://"+host)
		req.Header.Set("Content-Type", "application/json")
		res, err := web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	// The page itself.
	res, err := web.Get("https://" + u.Host + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Contains(page, []byte("<html")) {
		t.Fatalf("the viewer page: %d %.200s", res.StatusCode, page)
	}
	// Refusals: another sandbox's view host, a wrong token.
	var other struct{ URL string }
	c.call("POST", "/v1/sandboxes/other/desktop", "", 201, &other)
	ou, _ := url.Parse(other.URL)
	if res, b := exchange(ou.Host, u.Fragment); res.StatusCode == 200 {
		t.Fatalf("desk's link opened other's desktop: %s", b)
	}
	if res, b := exchange(u.Host, "dt_"+strings.Repeat("A", 43)); res.StatusCode == 200 {
		t.Fatalf("a made-up token opened the desktop: %s", b)
	}
	res, b := exchange(u.Host, u.Fragment)
	if res.StatusCode != 200 {
		t.Fatalf("the link's exchange: %d %s", res.StatusCode, b)
	}
	var cookie string
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-froog_desktop" {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	if cookie == "" {
		t.Fatalf("no session cookie: %v", res.Header["Set-Cookie"])
	}
	// The websocket starts the desktop in the sandbox and bridges to it.
	d := websocket.Dialer{NetDialContext: tr.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}}
	h := http.Header{"Origin": {"https://" + u.Host}, "Cookie": {cookie}}
	ws, wres, err := d.Dial("wss://"+u.Host+"/websockify", h)
	if err != nil {
		t.Fatalf("websocket: %v (%v)", err, wres)
	}
	defer ws.Close()
	// Paint the sandbox's screen, from inside the sandbox.
	var status struct{ Display string }
	wait.For(t, time.Minute, "the bridge starts the sandbox's desktop", func() bool {
		var st struct{ Stdout string }
		c.call("POST", "/v1/sandboxes/desk/exec", `{"command": "froog-desktop status"}`, 200, &st)
		return json.Unmarshal([]byte(st.Stdout), &status) == nil && status.Display != ""
	})
	c.call("POST", "/v1/sandboxes/desk/exec", `{"command": "DISPLAY=`+status.Display+` xsetroot -solid '#ff00ff'"}`, 200, nil)
	rc, err := testkit.NewRFB(testkit.NewWSStream(ws), true)
	if err != nil {
		t.Fatalf("RFB through the edge: %v", err)
	}
	// Any pixel of the root, whole screens until one shows the paint (a
	// desktop's panel and windows cover some of the root; the paint may
	// land after a first update).
	magenta := func(p [3]byte) bool { return p[0] > 200 && p[1] < 60 && p[2] > 200 }
	var last [3]byte // a pixel of the last update, for the failure
	if !wait.Until(30*time.Second, func() bool {
		img, err := rc.Screen()
		if err != nil {
			t.Fatalf("RFB through the edge: %v", err)
		}
		for y := 0; y < rc.H; y++ {
			for x := 0; x < rc.W; x++ {
				if last = testkit.RGBAt(img, x, y); magenta(last) {
					return true
				}
			}
		}
		return false
	}) {
		t.Fatalf("no magenta pixel of the desktop through the edge in 30 s (the last: %v)", last)
	}
}

// The wall through the real binary: a wall link is exchanged on the
// account's wall host; its event stream lists the running sandboxes and
// tiles come with pictures of their desktops (started by the wall); a
// sandbox that starts appears, one that is stopped goes, and one on the
// wall still stops at its own auto-stop deadline (the wall never
// extends it).
func TestWallThroughTheEdge(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("Xvnc"); err != nil {
		testdep.Missing(t, "Xvnc is not installed (deploy/testdeps.sh installs it)")
	}
	fd := startDev(t, devOptions{})
	c := fd.c
	t.Cleanup(func() {
		// The test stops both; one it did not reach may still run its
		// desktop, which a stop ends (whatever the answer).
		for _, n := range []string{"w1", "w2"} {
			req, _ := http.NewRequest("POST", c.base+"/v1/sandboxes/"+n+"/stop", nil)
			req.Header.Set("Authorization", "Bearer "+c.key)
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}
	})
	c.call("POST", "/v1/sandboxes", `{"name": "w1"}`, 202, nil)
	runs(t, c, "w1")
	var link struct{ URL string }
	c.call("POST", "/v1/wall", "", 201, &link)
	u, _ := url.Parse(link.URL)
	pool, edge := fd.pool, fd.edge
	web := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, n, edge)
	}, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("POST", "https://"+u.Host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q}`, u.Fragment)))
	req.Header.Set("Origin", "https://"+u.Host)
	req.Header.Set("Content-Type", "application/json")
	res, err := web.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("the wall link's exchange: %v %v", res, err)
	}
	res.Body.Close()
	var cookie string
	for _, ck := range res.Cookies() {
		cookie = ck.Name + "=" + ck.Value
	}
	req, _ = http.NewRequest("GET", "https://"+u.Host+"/events", nil)
	req.Header.Set("Cookie", cookie)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err = web.Do(req.WithContext(ctx))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("events: %v %v", res, err)
	}
	defer res.Body.Close()
	events := make(chan string, 100)
	go func() {
		defer close(events)
		b := make([]byte, 64<<10)
		var acc string
		for {
			n, err := res.Body.Read(b)
			acc += string(b[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				events <- acc[:i]
				acc = acc[i+2:]
			}
			if err != nil {
				return
			}
		}
	}()
	// until waits for an event holding want.
	until := func(want string) string {
		t.Helper()
		for ev := range events {
			if strings.Contains(ev, want) {
				return ev
			}
		}
		t.Fatalf("the event stream ended before %q", want)
		return ""
	}
	var w1 struct{ ID string }
	c.call("GET", "/v1/sandboxes/w1", "", 200, &w1)
	until(`"name":"w1"`)
	until(`"id":"` + w1.ID + `","v":`)
	until(`"state":"ok"`)
	pic, err := web.Do(func() *http.Request {
		r, _ := http.NewRequest("GET", "https://"+u.Host+"/tile/"+w1.ID+".jpg", nil)
		r.Header.Set("Cookie", cookie)
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	jpg, _ := io.ReadAll(pic.Body)
	pic.Body.Close()
	if pic.StatusCode != 200 || len(jpg) < 100 || !bytes.HasPrefix(jpg, []byte{0xff, 0xd8}) {
		t.Fatalf("w1's tile: %d, %d bytes", pic.StatusCode, len(jpg))
	}
	// A sandbox that starts appears on the open wall: w2, with a 25 s
	// auto-stop timer, which the wall showing it must not extend.
	c.call("POST", "/v1/sandboxes", `{"name": "w2", "ttl_secs": 25}`, 202, nil)
	runs(t, c, "w2")
	ran := time.Now()
	var w2 struct {
		ID         string
		AutoStopAt time.Time `json:"auto_stop_at"`
	}
	c.call("GET", "/v1/sandboxes/w2", "", 200, &w2)
	until(`"name":"w2"`)
	t.Logf("w2 on the wall %v after it was seen running", time.Since(ran).Round(time.Millisecond))
	until(`"id":"` + w2.ID + `","v":`) // its tile has a picture: the wall holds its desktop
	// sandboxesEvent waits for a list of the running sandboxes and says
	// whether it names name.
	sandboxesEvent := func() string {
		t.Helper()
		for {
			ev := until("event: sandboxes")
			if i := strings.Index(ev, "data: "); i >= 0 {
				return ev[i:]
			}
		}
	}
	// A stopped sandbox disappears.
	c.call("POST", "/v1/sandboxes/w1/stop", "", 202, nil)
	for ev := sandboxesEvent(); strings.Contains(ev, `"name":"w1"`); ev = sandboxesEvent() {
	}
	// w2 stops at its own deadline while the wall shows it, and goes.
	for ev := sandboxesEvent(); strings.Contains(ev, `"name":"w2"`); ev = sandboxesEvent() {
	}
	var got struct {
		DesiredState string    `json:"desired_state"`
		AutoStopAt   time.Time `json:"auto_stop_at"`
	}
	c.call("GET", "/v1/sandboxes/w2", "", 200, &got)
	if got.DesiredState != "stopped" {
		t.Errorf("w2 left the wall but wants %q", got.DesiredState)
	}
	if !got.AutoStopAt.IsZero() && !got.AutoStopAt.Equal(w2.AutoStopAt) {
		t.Errorf("w2's auto-stop moved from %v to %v while on the wall", w2.AutoStopAt, got.AutoStopAt)
	}
	var audit struct {
		Events []struct{ Action, Actor, Target string }
	}
	c.call("GET", "/v1/audit", "", 200, &audit)
	var stops []string
	for _, e := range audit.Events {
		if e.Target == "w2" && e.Action == "sandbox.stop" {
			stops = append(stops, e.Actor)
		}
	}
	if !slices.Equal(stops, []string{"auto-stop"}) {
		t.Errorf("w2's stops: %q, want one by its auto-stop timer", stops)
	}
	t.Logf("w2 left the wall %v after it was seen running (its timer: 25 s)", time.Since(ran).Round(time.Millisecond))
}
