package e2e_test

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// The Starting page in Chromium, through the real binary: a visit to a
// stopped auto-start sandbox whose app is not up yet is held, then shows
// the page, which says what the start waits for (the port); when the app
// comes up the page turns into it by itself, with no reload by the user.
// The page's script runs under its CSP (a hash that did not match would
// leave the page still). Its picture is kept.
func TestStartingPageChromium(t *testing.T) {
	t.Parallel()
	browser.Path(t) // before froogd starts
	d := startDev(t, devOptions{})
	newSandbox(t, d.c, "slow", 15*time.Second)
	port := loopback.FreePort(t)
	var u struct{ URL string }
	d.c.call("POST", "/v1/sandboxes/slow/urls", fmt.Sprintf(`{"port": %d, "public": true}`, port), 201, &u)
	d.c.call("PATCH", "/v1/sandboxes/slow", `{"auto_start": true}`, 200, nil)
	d.c.call("POST", "/v1/sandboxes/slow/stop", "", 202, nil)
	wait.For(t, 30*time.Second, "slow stops", func() bool {
		var sb struct{ State string }
		d.c.call("GET", "/v1/sandboxes/slow", "", 200, &sb)
		return sb.State == "stopped"
	})

	desk := &deskEnv{c: d.c, edge: d.edge, pool: d.pool, web: d.web(false)}
	pg := tab(t, desk.browser(t, 800, 400))
	// Held for the edge's 20 s (the sandbox runs at once, its port does
	// not answer), then the Starting page loads.
	if err := chromedp.Do(pg, chromedp.Navigate(u.URL)); err != nil {
		t.Fatal(err)
	}
	text := func() string {
		s, _ := chromedp.Run(pg, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		return s
	}
	waiting := "waiting for port " + strconv.Itoa(port) + " to answer"
	if !wait.Until(30*time.Second, func() bool { return strings.Contains(text(), waiting) }) {
		screenshot(t, pg, "starting-page.png")
		t.Fatalf("the Starting page does not say %q: %q", waiting, text())
	}
	screenshot(t, pg, "starting-page.png")

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>the app</title><h1>the app is up</h1>")
	})}
	go app.Serve(ln)
	t.Cleanup(func() { app.Close() })
	if !wait.Until(30*time.Second, func() bool { return strings.Contains(text(), "the app is up") }) {
		screenshot(t, pg, "starting-page-never-turned.png")
		t.Fatalf("the Starting page never turned into the app: %q", text())
	}
}
