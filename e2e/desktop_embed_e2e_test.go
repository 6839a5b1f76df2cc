package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/wait"
)

// blockedStorage are Chromium's options for a browser that refuses
// storage to cross-site iframes: the full browser (the headless shell
// reads no profile settings), third-party cookies blocked in the
// profile's settings (what a person, or the BlockThirdPartyCookies
// policy, sets), and storage not partitioned by site (else Chromium gives
// such an iframe a storage of its own partition rather than refusing
// it). Then a cross-site iframe's every touch of localStorage throws
// SecurityError, as in the browsers and policies users met.
func blockedStorage(t *testing.T) []chromedp.ExecAllocatorOption {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "Default"), 0o755); err != nil {
		t.Fatal(err)
	}
	prefs := `{"profile": {"block_third_party_cookies": true, "cookie_controls_mode": 1}}`
	if err := os.WriteFile(filepath.Join(dir, "Default", "Preferences"), []byte(prefs), 0o644); err != nil {
		t.Fatal(err)
	}
	return []chromedp.ExecAllocatorOption{browser.Full(t), chromedp.UserDataDir(dir),
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,ThirdPartyStoragePartitioning")}
}

// frameOf attaches to the cross-site iframe of ctx's browser whose
// address starts with prefix (Chromium runs it as a target of its own).
func frameOf(t *testing.T, ctx context.Context, prefix string) context.Context {
	t.Helper()
	var id target.ID
	wait.For(t, 60*time.Second, "the iframe of "+prefix, func() bool {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.Type == "iframe" && strings.HasPrefix(in.URL, prefix) {
				id = in.TargetID
				return true
			}
		}
		return false
	})
	fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
	t.Cleanup(cancel)
	return fctx
}

// An embed in a browser that blocks third-party storage: the viewer in
// another site's iframe connects (its session is a Partitioned cookie,
// which such a browser keeps), says in its status line that it cannot
// keep settings, and a setting changed there works for the page. A
// second iframe of a third site shows that storage really throws there.
func TestDesktopViewerWithStorageBlocked(t *testing.T) {
	t.Parallel()
	e := devDesktop(t)
	e.sandbox(t, "embed")
	link := e.link(t, "embed", "desktop", "")
	lu, _ := url.Parse(link)
	var sitePort string
	// The embedder's page; its script is a file of its own, as a careful
	// site's CSP would have it: the probe's answer becomes the title.
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/probe":
			fmt.Fprint(w, `<!doctype html><script>let r;`+
				`try { localStorage.getItem('x'); r = 'storage works'; } catch (e) { r = 'storage threw ' + e.name; }`+
				`parent.postMessage(r, '*');</script>`)
		case "/top.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, `addEventListener('message', (e) => { if (typeof e.data === 'string') document.title = 'probe: ' + e.data; });`)
		default:
			fmt.Fprintf(w, `<!doctype html><title>embedder</title><script src="/top.js"></script>`+
				`<iframe id="desk" src="%s" allow="autoplay; fullscreen; clipboard-read; clipboard-write" style="width:800px;height:450px;border:0"></iframe>`+
				`<iframe src="https://probe.example:%s/probe" style="width:10px;height:10px;border:0"></iframe>`, link, sitePort)
		}
	}))
	_, sitePort, _ = net.SplitHostPort(site.Listener.Addr().String())
	site.StartTLS()
	defer site.Close()
	ctx := e.browserWith(t, 1000, 700, blockedStorage(t), "MAP embedder.example 127.0.0.1:"+sitePort, "MAP probe.example 127.0.0.1:"+sitePort)
	if err := chromedp.Do(ctx, chromedp.Navigate("https://embedder.example/")); err != nil {
		t.Fatal(err)
	}
	var probe string
	wait.For(t, 60*time.Second, "the probe iframe's answer", func() bool {
		probe, _ = chromedp.Run(ctx, chromedp.Title())
		return strings.HasPrefix(probe, "probe: ")
	})
	if !strings.Contains(probe, "threw SecurityError") {
		t.Fatalf("the control: a cross-site iframe's storage is not blocked in this browser (%s)", probe)
	}

	desk := frameOf(t, ctx, "https://"+lu.Host+"/")
	status := func() (conn, note string) {
		type st struct{ Conn, Note, Path string }
		s, _ := chromedp.Run(desk, chromedp.Evaluate[st](`({Conn: document.getElementById('st-conn')?.textContent || '',
			Note: document.getElementById('st-note')?.textContent || '', Path: location.pathname})`))
		if strings.HasPrefix(s.Path, "/error/") {
			t.Fatalf("the embedded viewer showed the error page %s", s.Path)
		}
		return s.Conn, s.Note
	}
	var conn, note string
	if !wait.Until(120*time.Second, func() bool { conn, note = status(); return strings.HasPrefix(conn, "connected") }) {
		screenshot(t, ctx, "e2e-viewer-storage-blocked.png")
		t.Fatalf("the viewer in an iframe with storage blocked never connected: its status line says %q, %q", conn, note)
	}
	screenshot(t, ctx, "e2e-viewer-storage-blocked.png")
	if !strings.Contains(note, "settings are not kept") {
		t.Errorf("the status line does not say that settings are not kept: %q", note)
	}
	// A setting changed in the menu: written to nowhere, kept for the
	// page, and the page goes on.
	if _, err := chromedp.Run(desk, chromedp.Evaluate[bool](`(() => { const s = document.getElementById('scaling');
		s.value = 'none'; s.dispatchEvent(new Event('change')); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	if conn, note = status(); !strings.HasPrefix(conn, "connected") || strings.Contains(note, "failed") {
		t.Errorf("after a setting changed, the status line says %q, %q", conn, note)
	}
}
