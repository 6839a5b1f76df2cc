package e2e_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/wait"
)

// quicPage is the app's page for the HTTP/3 test.
const quicPage = `<!doctype html><title>served over quic</title>
<body style="margin:0;background:#0d47a1;color:#fff;font:28px sans-serif;padding:24px"><h1>froog app over HTTP/3</h1>`

// Chromium reaches a private URL over HTTP/3, through the real binary
// (froogd dev serves it by default): the link with its token turns into
// the cookie and a clean address, the page comes over h3, and the
// cookie lets the next request in over h3 while a request without it is
// refused. QUIC is forced on for the URL's origin, so nothing falls back
// to TCP unseen: the protocol is read from the page's own timing entries.
func TestH3Chromium(t *testing.T) {
	t.Parallel()
	browser.Path(t) // before froogd starts
	d := startDev(t, devOptions{})
	newSandbox(t, d.c, "quic", 15*time.Second)
	html, _ := json.Marshal(quicPage)
	d.c.call("POST", "/v1/sandboxes/quic/exec", `{"command": "mkdir -p site && echo pong > site/ping && cat > site/index.html", "stdin": `+string(html)+`}`, 200, nil)
	port := serveIn(t, d.c, "quic", "python3 -m http.server %d --bind 127.0.0.1 --directory site")
	var u struct{ URL, Host string }
	d.c.call("POST", "/v1/sandboxes/quic/urls", fmt.Sprintf(`{"port": %d, "public": false}`, port), 201, &u)
	if !strings.Contains(u.URL, "_token=") {
		t.Fatalf("the private URL's link %q carries no token", u.URL)
	}

	// The link with the edge's own port: Chromium's host-resolver rule
	// that changes the port reaches TCP but not QUIC, whose session keeps
	// the URL's port (443).
	_, edgePort, _ := net.SplitHostPort(d.edge)
	link, err := url.Parse(u.URL)
	if err != nil {
		t.Fatal(err)
	}
	link.Host = link.Hostname() + ":" + edgePort
	origin := "https://" + link.Host
	// QUIC forced on for the URL's origin, so nothing falls back to TCP
	// unseen, no Alt-Svc needed; its certificate's keys trusted, as
	// Chromium's QUIC does not take --ignore-certificate-errors.
	desk := &deskEnv{c: d.c, edge: d.edge, pool: d.pool, web: d.web(false)}
	ctx := desk.browserWith(t, 900, 420, []chromedp.ExecAllocatorOption{
		chromedp.Flag("ignore-certificate-errors-spki-list", leafKeys(t, d, link.Hostname())),
		chromedp.Flag("enable-quic", true), chromedp.Flag("origin-to-force-quic-on", link.Host)})
	if err := chromedp.Do(ctx, chromedp.Navigate(link.String())); err != nil {
		t.Fatal(err)
	}
	eval := func(js string) string {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	if !wait.Until(30*time.Second, func() bool { return eval(`document.title`) == "served over quic" }) {
		screenshot(t, ctx, "h3-chromium.png")
		t.Fatalf("the app's page never came: title %q at %s", eval(`document.title`), eval(`location.href`))
	}
	screenshot(t, ctx, "h3-chromium.png")
	if got, want := eval(`location.href`), origin+"/"; got != want {
		t.Errorf("the address after the link is %q, want %q (the token taken out)", got, want)
	}
	if got := eval(`performance.getEntriesByType('navigation')[0].nextHopProtocol`); got != "h3" {
		t.Fatalf("the page came over %q, want h3", got)
	}
	// The cookie the redirect set lets the next request in, over HTTP/3;
	// the same request without credentials is refused there.
	withCookie := eval(`fetch('/ping').then(async (r) => r.status + ' ' + (await r.text()).trim() + ' ' + performance.getEntriesByName(r.url).at(-1).nextHopProtocol)`)
	if withCookie != "200 pong h3" {
		t.Errorf("a request with the cookie: %q, want \"200 pong h3\"", withCookie)
	}
	without := eval(`fetch('/ping?bare', {credentials: 'omit'}).then(async (r) => (await r.text(), r.status + ' ' + performance.getEntriesByName(r.url).at(-1).nextHopProtocol))`)
	if without != "401 h3" {
		t.Errorf("a request without the cookie: %q, want \"401 h3\"", without)
	}
}

// leafKeys are the SPKI hashes (base64 SHA-256) of the certificates
// the edge gives host: Chromium's QUIC does not take
// --ignore-certificate-errors, only a list of the keys to trust.
func leafKeys(t *testing.T, d *dev, host string) string {
	t.Helper()
	c, err := tls.Dial("tcp", d.edge, &tls.Config{RootCAs: d.pool, ServerName: host})
	if err != nil {
		t.Fatalf("the edge's certificate for %s: %v", host, err)
	}
	defer c.Close()
	var keys []string
	for _, cert := range c.ConnectionState().PeerCertificates {
		h := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
		keys = append(keys, base64.StdEncoding.EncodeToString(h[:]))
	}
	return strings.Join(keys, ",")
}
