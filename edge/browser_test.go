package edge_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/edge"
	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// chromium is the headless browser every page is checked in.
var chromium = browser.Chromium

// artefacts is where screenshots are kept for people to look at.
func artefacts(t *testing.T) string {
	dir := os.Getenv("FROOG_ARTEFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".artefacts")
	}
	dir = filepath.Join(dir, "edge-pages")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every page a person sees renders in a real browser.
func TestPagesInChromium(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	_, edgePort, _ := net.SplitHostPort(r.addr)
	rules := "MAP *." + domain + " 127.0.0.1:" + edgePort
	port := loopback.FreePort(t)
	r.host("idle-1-hhhhhh", port, true, "")
	r.host("priv-1-iiiiii", echo(t), false, "pt_page")
	pages := []struct{ name, url, title string }{
		{"not-found", "https://nothing." + domain + "/", "No such URL"},
		{"token-required", "https://priv-1-iiiiii." + domain + "/", "This URL is private"},
		{"token-invalid", "https://priv-1-iiiiii." + domain + "/?_token=pt_wrong", "This link does not open this URL"},
		{"bad-gateway", "https://idle-1-hhhhhh." + domain + "/", "Nothing is listening on " + strconv.Itoa(port)},
	}
	dir := artefacts(t)
	for _, p := range pages {
		dom := chromium(t, rules, "--dump-dom", p.url)
		if !strings.Contains(dom, "<h1>"+p.title+"</h1>") {
			t.Errorf("%s: the page did not render: %s", p.name, dom)
			continue
		}
		shot := filepath.Join(dir, p.name+".png")
		chromium(t, rules, "--window-size=900,600", "--screenshot="+shot, p.url)
		if st, err := os.Stat(shot); err != nil || st.Size() < 2000 {
			t.Errorf("%s: no screenshot: %v", p.name, err)
		}
	}
	// Too many requests: an edge with a budget of one, spent.
	limited, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.RateLimit, o.RateBurst = 0.001, 1 })
	do(t, r.client(limited, false), "GET", "https://nothing."+domain+"/")
	_, limitedPort, _ := net.SplitHostPort(limited)
	limitedRules := "MAP *." + domain + " 127.0.0.1:" + limitedPort
	if dom := chromium(t, limitedRules, "--dump-dom", "https://priv-1-iiiiii."+domain+"/"); !strings.Contains(dom, "<h1>Too many requests</h1>") {
		t.Errorf("rate-limited page: %s", dom)
	}
	chromium(t, limitedRules, "--window-size=900,600", "--screenshot="+filepath.Join(dir, "rate-limited.png"), "https://priv-1-iiiiii."+domain+"/")
	// Forbidden: no browser sends CONNECT, so the page a raw client got
	// is rendered from a file.
	conn, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: r.ca.Pool(), ServerName: "priv-1-iiiiii." + domain, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: priv-1-iiiiii.%s\r\nAccept: text/html\r\n\r\n", domain)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != 403 {
		t.Fatalf("CONNECT: %v %v", res, err)
	}
	page, _ := io.ReadAll(res.Body)
	conn.Close()
	file := filepath.Join(t.TempDir(), "forbidden.html")
	os.WriteFile(file, page, 0o644)
	if dom := chromium(t, rules, "--dump-dom", "file://"+file); !strings.Contains(dom, "<h1>Not allowed here</h1>") {
		t.Errorf("forbidden page: %s", dom)
	}
	chromium(t, rules, "--window-size=900,600", "--screenshot="+filepath.Join(dir, "forbidden.png"), "file://"+file)

	// The stopped notice.
	if _, err := r.st.UpdateSandbox(ctx, r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.State = store.StateStopped; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	r.tun.Drop(r.sb.ID)
	dom := chromium(t, rules, "--dump-dom", "https://idle-1-hhhhhh."+domain+"/")
	if !strings.Contains(dom, "<h1>This sandbox is stopped</h1>") {
		t.Fatalf("stopped page: %s", dom)
	}
	chromium(t, rules, "--window-size=900,600", "--screenshot="+filepath.Join(dir, "stopped.png"), "https://idle-1-hhhhhh."+domain+"/")
}

// A private URL inside a cross-site iframe loads: the link's token becomes
// a partitioned cookie that the iframe's next request carries.
func TestPrivateURLInCrossSiteIframe(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	var mu sync.Mutex
	var seen []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, req.URL.RequestURI()+" cookie="+req.Header.Get("Cookie"))
		mu.Unlock()
		fmt.Fprint(w, "<!doctype html><title>app</title><p id=app>inside the sandbox</p>")
	}))
	defer app.Close()
	r.host("embed-1-jjjjjj", app.Listener.Addr().(*net.TCPAddr).Port, false, "pt_embed")
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>site</title><iframe src="https://embed-1-jjjjjj.`+domain+`/page?_token=pt_embed"></iframe>`)
	}))
	defer site.Close()
	_, edgePort, _ := net.SplitHostPort(r.addr)
	_, sitePort, _ := net.SplitHostPort(site.Listener.Addr().String())
	rules := "MAP *." + domain + " 127.0.0.1:" + edgePort + ", MAP embedder.example 127.0.0.1:" + sitePort
	chromium(t, rules, "--virtual-time-budget=5000", "--window-size=900,600", "--screenshot="+filepath.Join(artefacts(t), "iframe.png"), "http://embedder.example/")
	mu.Lock()
	defer mu.Unlock()
	// The app saw the page once, after the redirect, without the token
	// (the edge took it out of the address and the cookie).
	if len(seen) == 0 || seen[0] != "/page cookie=" {
		t.Fatalf("the app saw %q; want /page, without token or cookie", seen)
	}
}

// The "starting…" page: a browser that waited past the hold gets a page
// that reloads itself, and lands on the app once the sandbox runs.
func TestStartingPageInChromium(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>app</title><p id=app>awake</p>")
	}))
	defer app.Close()
	r.host("slow-1-llllll", app.Listener.Addr().(*net.TCPAddr).Port, true, "")
	// A sandbox with auto_start that nothing starts (no hostctl here): the
	// hold runs out.
	if _, err := r.st.UpdateSandbox(ctx, r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.State, s.DesiredState, s.AutoStart = store.StateStopped, store.StateStopped, true
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	r.tun.Drop(r.sb.ID)
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.HoldTimeout = time.Second })
	_, port, _ := net.SplitHostPort(addr)
	rules := "MAP *." + domain + " 127.0.0.1:" + port
	url := "https://slow-1-llllll." + domain + "/"
	if dom := chromium(t, rules, "--dump-dom", url); !strings.Contains(dom, "<h1>Starting…</h1>") || !strings.Contains(dom, `http-equiv="refresh"`) {
		t.Fatalf("past the hold: %s", dom)
	}
	chromium(t, rules, "--window-size=900,600", "--screenshot="+filepath.Join(artefacts(t), "starting.png"), url)
	if sb, _ := r.st.SandboxByID(ctx, r.sb.ID); sb.DesiredState != store.StateRunning {
		t.Fatalf("the visit did not ask for a start: %s", sb.DesiredState)
	}
	// The sandbox comes up while the page waits (the edge has answered this
	// visit's first request with the starting page); its next reload shows
	// the app.
	starting := func() int { return strings.Count(r.logs.String(), `"host":"slow-1-llllll.`+domain+`"`) }
	before := starting()
	go func() {
		if !wait.Until(30*time.Second, func() bool { return starting() > before }) { // then the "hostctl" of this test starts it
			t.Errorf("the edge never logged the visit to the starting page")
		}
		r.st.UpdateSandbox(ctx, r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.State = store.StateRunning; return nil }, nil)
	}()
	if dom := chromium(t, rules, "--virtual-time-budget=30000", "--dump-dom", url); !strings.Contains(dom, "<p id=\"app\">awake</p>") {
		t.Fatalf("the starting page never landed on the app: %s", dom)
	}
}
