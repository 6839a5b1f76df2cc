package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// embedder serves another site's page that embeds a view link as the
// docs show (allow="… clipboard-read; clipboard-write"), beside a text
// field to click away to; its address is https://embedder.example/.
func embedder(t *testing.T, link *string) (port string) {
	t.Helper()
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>embedder</title><style>body{margin:0}</style>`+
			`<input id="elsewhere" style="position:absolute;left:10px;top:10px;width:200px">`+
			`<iframe id="desk" src="%s" allow="autoplay; fullscreen; clipboard-read; clipboard-write" `+
			`style="position:absolute;left:0;top:50px;width:800px;height:450px;border:0"></iframe>`, *link)
	}))
	_, port, _ = net.SplitHostPort(site.Listener.Addr().String())
	site.StartTLS()
	t.Cleanup(site.Close)
	return port
}

// clipSpy counts the page's calls of the async Clipboard API from now on
// (window.froogClipCalls); each still does what it did.
const clipSpy = `(() => { const c = navigator.clipboard; window.froogClipCalls = 0;
	for (const m of ['readText', 'writeText', 'read', 'write']) { const f = c[m].bind(c);
		c[m] = (...a) => { window.froogClipCalls++; return f(...a); }; }
	return true; })()`

// The seamless clipboard through the real binary, in an embed with the
// clipboard permissions granted: text copied in the sandbox (xclip)
// reaches the browser's clipboard, and text copied in the browser
// reaches the sandbox's when the viewer gets the focus. A view-only
// viewer neither reads nor writes the browser's clipboard, and gets
// nothing of the sandbox's.
func TestDesktopClipboardInChromium(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("xclip"); err != nil {
		testdep.Missing(t, "xclip is not installed (deploy/testdeps.sh installs it)")
	}
	e := devDesktop(t)
	e.sandbox(t, "clip")
	display := e.display(t, "clip", "desktop")
	copyIn := func(text string) { // xclip owns the sandbox's clipboard until another copy takes it
		body, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("printf %%s '%s' | DISPLAY=%s exec xclip -quiet -selection clipboard -i", text, display)})
		e.c.call("POST", "/v1/sandboxes/clip/jobs", string(body), 201, nil)
	}
	inSandbox := func() string {
		return e.sh(t, "clip", "DISPLAY="+display+" timeout 5 xclip -o -selection clipboard 2>/dev/null || true")
	}

	var link string
	port := embedder(t, &link)
	ctx := e.browserWith(t, 1000, 700, []chromedp.ExecAllocatorOption{browser.Full(t)}, "MAP embedder.example 127.0.0.1:"+port)
	// Clipboard permissions, as a person gives them when asked; the
	// embedder's page stays focused, as a window in front is.
	grant := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			if _, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
				Permission: &cdpbrowser.PermissionDescriptor{Name: name, AllowWithoutSanitization: name == "clipboard-write"},
				Setting:    cdpbrowser.PermissionSettingGranted}); err != nil {
				return fmt.Errorf("grant %s: %w", name, err)
			}
		}
		_, err := cdp.Call(ctx, tg, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
		return err
	})
	browserClip := func() string {
		s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText().catch((e) => 'error: ' + e.message)`, chromedp.EvalAwaitPromise))
		return s
	}
	setBrowserClip := func(text string) {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`navigator.clipboard.writeText(%q).then(() => true)`, text), chromedp.EvalAwaitPromise)); err != nil {
			t.Fatalf("the browser's clipboard: %v", err)
		}
	}
	// open embeds a link and waits until its viewer connects; it
	// returns the viewer's frame.
	open := func(path string) context.Context {
		link = e.link(t, "clip", path, "")
		u, _ := url.Parse(link)
		if err := chromedp.Do(ctx, grant, chromedp.Navigate("https://embedder.example/")); err != nil {
			t.Fatal(err)
		}
		desk := frameOf(t, ctx, "https://"+u.Host+"/")
		wait.For(t, 120*time.Second, "the embedded viewer to connect", func() bool {
			s, _ := chromedp.Run(desk, chromedp.Evaluate[string](`document.getElementById('st-conn')?.textContent || location.pathname`))
			if strings.HasPrefix(s, "/error/") {
				t.Fatalf("the embedded viewer showed the error page %s", s)
			}
			return strings.HasPrefix(s, "connected")
		})
		if _, err := chromedp.Run(desk, chromedp.Evaluate[bool](clipSpy)); err != nil {
			t.Fatal(err)
		}
		return desk
	}
	str := func(desk context.Context, js string) string {
		s, _ := chromedp.Run(desk, chromedp.Evaluate[string](js))
		return s
	}
	// away clicks the embedder's field, into clicks the desktop's
	// picture: the viewer loses the focus, then gets it (each waited
	// for, so that a focus the viewer missed is the viewer's fault).
	var desk context.Context
	focusIs := func(want bool, what string) {
		wait.For(t, 20*time.Second, what, func() bool { return str(desk, `String(document.hasFocus())`) == fmt.Sprint(want) })
	}
	away := func() {
		if err := chromedp.Do(ctx, chromedp.Click("#elsewhere")); err != nil {
			t.Fatal(err)
		}
		focusIs(false, "the viewer to lose the focus")
	}
	into := func() {
		if err := chromedp.Do(ctx, chromedp.MouseClickXY(400, 300)); err != nil {
			t.Fatal(err)
		}
		focusIs(true, "the viewer to have the focus")
	}

	// A full session.
	desk = open("desktop")
	into()
	copyIn("copied in the sandbox")
	var got string
	if !wait.Until(30*time.Second, func() bool { got = browserClip(); return got == "copied in the sandbox" }) {
		t.Fatalf("text copied in the sandbox never reached the browser's clipboard: it holds %q; the viewer's box %q, status %q", got,
			str(desk, `document.getElementById('clipboard').value`), str(desk, `document.getElementById('status').textContent`))
	}
	away()
	setBrowserClip("copied in the browser ✓")
	into()
	if !wait.Until(30*time.Second, func() bool { got = inSandbox(); return got == "copied in the browser ✓" }) {
		t.Fatalf("text copied in the browser never reached the sandbox's clipboard: it holds %q; status %q", got, str(desk, `document.getElementById('status').textContent`))
	}
	if calls := str(desk, `String(window.froogClipCalls)`); calls == "0" {
		t.Errorf("the control: the full viewer's clipboard calls were not counted")
	}

	// A view-only session: the browser's clipboard is never touched, the
	// sandbox's never reaches the page, and nothing goes in.
	desk = open("desktop?viewonly=1")
	setBrowserClip("not for a view-only page")
	into()
	away()
	into()
	copyIn("not for the view-only page")
	wait.For(t, 30*time.Second, "the sandbox's own copy", func() bool { return inSandbox() == "not for the view-only page" })
	// A full viewer had it within seconds; this one gets 10.
	if wait.Until(10*time.Second, func() bool {
		return browserClip() == "not for the view-only page" || str(desk, `document.getElementById('clipboard').value`) != "" ||
			str(desk, `String(window.froogClipCalls)`) != "0"
	}) {
		t.Errorf("a view-only viewer used the clipboard: the browser's holds %q, its box %q, %s calls of the Clipboard API", browserClip(),
			str(desk, `document.getElementById('clipboard').value`), str(desk, `String(window.froogClipCalls)`))
	}
}
