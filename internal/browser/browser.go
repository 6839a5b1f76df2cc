// Package browser runs Debian's headless Chromium for tests: every page a
// person sees is checked in a real browser. The browser is
// chromium-headless-shell, Chromium's own headless build (Blink, V8 and
// its network stack, without the desktop browser's windows): the same
// pages cost it about a quarter of the full browser's CPU in --headless,
// and make test runs dozens of them beside each other. The sandboxes'
// own browser, in their desktops, stays the full one, as does a test
// that needs what only it does (Full).
package browser

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"froog.tech/froog/internal/testdep"
)

// Path is the test browser's binary. It skips the test under -short (the
// short tier has no browser) and where the browser is not installed
// (deploy/testdeps.sh installs it; under CI that fails): a test that
// starts other processes first asks here before it does.
func Path(t testing.TB) string {
	t.Helper()
	testdep.Short(t, "drives Chromium")
	bin, err := exec.LookPath("chromium-headless-shell")
	if err != nil {
		testdep.Missing(t, "chromium-headless-shell is not installed (deploy/testdeps.sh installs it)")
	}
	return bin
}

// Full is Start's option for the full Chromium, the desktops' browser,
// in place of the headless shell: for what only it does — a profile's
// preferences (third-party cookies blocked) and cross-site iframes as
// targets of their own.
func Full(t testing.TB) chromedp.ExecAllocatorOption {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		testdep.Missing(t, "chromium is not installed (deploy/testdeps.sh installs it)")
	}
	return chromedp.ExecPath(bin)
}

// Chromium runs headless Chromium with args, names resolved by rules
// (--host-resolver-rules), and returns what it printed. It skips the
// test where Chromium is not installed (deploy/testdeps.sh installs it;
// under CI that fails), and under -short (the short tier has no browser).
// The certificates of the test's local CA are not in Chromium's store, so
// it is told to accept any.
func Chromium(t testing.TB, rules string, args ...string) string {
	t.Helper()
	bin := Path(t)
	Watching(t)
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--ignore-certificate-errors", "--host-resolver-rules=" + rules}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	// A page that did not load prints nothing and exits 0; the reason
	// (net::ERR_...) is on stderr, among Chromium's noise: logged, for a
	// test that fails on the empty page.
	for line := range strings.SplitSeq(errb.String(), "\n") {
		if strings.Contains(line, "Page load failed") {
			t.Logf("chromium: %s", line)
		}
	}
	return out.String()
}

// Start starts headless Chromium for the test, with a w×h window, and
// returns its allocator's context: each chromedp.NewContext of it is a
// tab. The browser ends with the test. As Chromium does, it trusts any
// certificate; opts add to chromedp's defaults and these, or replace
// them (a flag given again wins). Under -short the test skips; where
// Chromium is not installed it is testdep.Missing.
func Start(t testing.TB, w, h int, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	bin := Path(t)
	all := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("ignore-certificate-errors", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(w, h), chromedp.UserDataDir(t.TempDir()))
	Watching(t)
	ctx, cancel := chromedp.NewExecAllocator(context.Background(), append(all, opts...)...)
	t.Cleanup(cancel)
	return ctx
}
