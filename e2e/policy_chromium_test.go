package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/wait"
)

// framedApp is the app's page: it tells its parent, by postMessage, that
// it ran, which the parent cannot learn otherwise of a cross-site frame.
const framedApp = `<!doctype html><title>the app</title>
<body style="margin:0;background:#1b5e20;color:#fff;font:28px sans-serif;padding:24px">
<h1>froog app, framed</h1>
<script>parent.postMessage('app ran on ' + location.host, '*');</script>`

// framingSite serves the test's parent pages, on whatever origin the
// browser asks for: / frames ?src= and puts what the frame says in its
// title. /set and /check are the control of a browser that blocks
// third-party cookies: /set sets an unpartitioned cookie and redirects
// to /check, which says whether it came back.
func framingSite(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/set":
		w.Header().Set("Set-Cookie", "probe=1; Path=/; Secure; HttpOnly; SameSite=None")
		http.Redirect(w, r, "/check", http.StatusFound)
	case "/check":
		kept := "blocked"
		if _, err := r.Cookie("probe"); err == nil {
			kept = "kept"
		}
		fmt.Fprintf(w, `<!doctype html><script>parent.postMessage('cookie %s', '*');</script>`, kept)
	default:
		fmt.Fprintf(w, `<!doctype html><title>%s: nothing from the frame</title>
<body style="font:20px sans-serif"><p>the parent, on https://%[1]s</p>
<iframe id="f" src="%s" style="width:640px;height:180px;border:4px solid #888"></iframe>
<script>addEventListener('message', (e) => { document.title = '%[1]s: ' + e.data; });
document.getElementById('f').addEventListener('load', () => { document.body.dataset.loaded = 'yes'; });</script>`, r.Host, r.URL.Query().Get("src"))
	}
}

// A URL's frame_ancestors in Chromium, through the real binary: a page
// of the allowed origin frames the URL (the app's page runs in the
// frame); a page of another origin gets Chromium's refusal, which names
// the URL's directive. A private URL's link in the allowed frame works
// in a browser that blocks third-party cookies (the control: such a
// cookie of another site's frame is not kept): the URL's cookie is
// Partitioned. The parents are HTTPS origins the test serves, reached
// by Chromium's host-resolver rules; each case's picture is kept.
func TestURLFrameAncestorsChromium(t *testing.T) {
	t.Parallel()
	blocked := blockedStorage(t) // the full browser, asked for before froogd starts
	d := startDev(t, devOptions{})
	newSandbox(t, d.c, "frame", 15*time.Second)
	html, _ := json.Marshal(framedApp)
	d.c.call("POST", "/v1/sandboxes/frame/exec", `{"command": "mkdir -p site && cat > site/index.html", "stdin": `+string(html)+`}`, 200, nil)
	host := func(public bool) (u struct{ URL, Host string }) {
		port := serveIn(t, d.c, "frame", "python3 -m http.server %d --bind 127.0.0.1 --directory site")
		d.c.call("POST", "/v1/sandboxes/frame/urls", fmt.Sprintf(`{"port": %d, "public": %v, "frame_ancestors": ["https://allowed.example"]}`, port, public), 201, &u)
		return u
	}
	pub, priv := host(true), host(false)

	site := httptest.NewUnstartedServer(http.HandlerFunc(framingSite))
	_, sitePort, _ := net.SplitHostPort(site.Listener.Addr().String())
	site.StartTLS()
	t.Cleanup(site.Close)
	rules := []string{"MAP allowed.example 127.0.0.1:" + sitePort, "MAP other.example 127.0.0.1:" + sitePort, "MAP probe.example 127.0.0.1:" + sitePort}
	desk := &deskEnv{c: d.c, edge: d.edge, pool: d.pool, web: d.web(false)}
	ctx := desk.browserWith(t, 900, 420, blocked, rules...)

	// frame opens parent's page framing src in a tab of its own; title
	// is what the page's title says now (the frame's message), refusals
	// Chromium's security messages that name frame-ancestors so far.
	frame := func(parent, src string) (pg context.Context, title func() string, refusals func() []string) {
		pg = tab(t, ctx)
		var mu sync.Mutex
		var seen []string
		if err := chromedp.Listen(pg, func(ev any) {
			if ev, ok := ev.(*log.EventEntryAdded); ok && ev.Entry.Source == log.EntrySourceSecurity && strings.Contains(ev.Entry.Text, "frame-ancestors") {
				mu.Lock()
				seen = append(seen, ev.Entry.Text)
				mu.Unlock()
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(pg, chromedp.Navigate("https://"+parent+"/?src="+url.QueryEscape(src))); err != nil {
			t.Fatal(err)
		}
		title = func() string { s, _ := chromedp.Run(pg, chromedp.Title()); return s }
		refusals = func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
		return pg, title, refusals
	}
	framed := func(what, parent, src, host, shot string) {
		t.Helper()
		pg, title, refusals := frame(parent, src)
		want := parent + ": app ran on " + host
		if !wait.Until(30*time.Second, func() bool { return title() == want }) {
			screenshot(t, pg, shot)
			t.Fatalf("%s: the page's title is %q, want %q (the app in the frame never ran); Chromium said %q", what, title(), want, refusals())
		}
		screenshot(t, pg, shot)
		if r := refusals(); r != nil {
			t.Errorf("%s: Chromium refused a frame: %q", what, r)
		}
	}

	framed("the allowed origin", "allowed.example", "https://"+pub.Host+"/", pub.Host, "frame-ancestors-allowed.png")

	pg, title, refusals := frame("other.example", "https://"+pub.Host+"/")
	if !wait.Until(30*time.Second, func() bool {
		loaded, _ := chromedp.Run(pg, chromedp.Evaluate[string](`document.body.dataset.loaded || ''`))
		return loaded == "yes" && refusals() != nil
	}) {
		t.Fatalf("another origin: Chromium never refused the frame; the page's title is %q", title())
	}
	screenshot(t, pg, "frame-ancestors-refused.png")
	if r := refusals(); !strings.Contains(r[0], `"frame-ancestors https://allowed.example"`) {
		t.Errorf("another origin: Chromium's refusal %q does not name the URL's directive", r)
	}
	if got := title(); got != "other.example: nothing from the frame" {
		t.Errorf("another origin: the page's title is %q: the app ran in a frame Chromium refused", got)
	}

	// The control, then the private URL's link in the allowed frame.
	_, title, _ = frame("allowed.example", "https://probe.example/set")
	if !wait.Until(30*time.Second, func() bool { return strings.HasPrefix(title(), "allowed.example: cookie ") }) || title() != "allowed.example: cookie blocked" {
		t.Fatalf("the control: %q, want a third-party cookie blocked in this browser", title())
	}
	framed("a private URL's link", "allowed.example", priv.URL, priv.Host, "frame-ancestors-private.png")
}
