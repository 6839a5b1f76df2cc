package e2e_test

import (
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// h2specDeviations are the h2spec cases the edge fails on purpose or by
// its HTTP/2 server's (net/http's) stock behaviour, by h2spec's own case
// names (SECTION/N, as `h2spec http2/4.2/3` selects them), with why.
// Anything else that fails, fails the test; a case listed here that
// passes fails it too, so that the list stays true.
var h2specDeviations = map[string]string{
	// Not a deviation: h2spec sends a 17 KB HEADERS frame assuming the
	// default SETTINGS_MAX_FRAME_SIZE of 16 KiB, but net/http's server
	// advertises 1 MiB in its first SETTINGS frame, so the frame is legal
	// and the request is answered (RFC 9113 §4.2).
	"http2/4.2/3": "net/http advertises SETTINGS_MAX_FRAME_SIZE 1 MiB; h2spec assumes 16 KiB",
	// net/http's server hangs up (GOAWAY PROTOCOL_ERROR) on a SETTINGS
	// frame that holds one setting twice ("settings_big_or_dups" in
	// h2_bundle.go); RFC 9113 §6.5.3 says to apply them in order.
	"http2/6.5.3/1": "net/http refuses a SETTINGS frame with duplicate settings (connection error)",
	// net/http's server answers a request carrying a connection-specific
	// header (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
	// Upgrade) or a TE other than "trailers" with its own 400 response
	// (http2checkValidHTTP2RequestHeaders) instead of the stream error
	// RFC 9113 §8.2.2 asks for. The request never reaches the edge's
	// handler, let alone a sandbox, so nothing is smuggled either way.
	"http2/8.1.2.2/1": "net/http answers a connection-specific header with 400, not RST_STREAM",
	"http2/8.1.2.2/2": `net/http answers TE other than "trailers" with 400, not RST_STREAM`,
}

// HTTP/2 conformance of the real edge: h2spec (strict) over TLS against
// froogd dev, on a public URL's host so that requests reach a sandbox's
// app. h2spec comes through the module proxy as a tool dependency
// (go.mod's tool directive).
func TestH2Spec(t *testing.T) {
	t.Parallel()
	// h2spec dials the host it names (and sends it as SNI and
	// :authority): the URL host must resolve to the edge's loopback
	// address, which a private /etc/hosts in a mount namespace of its own
	// arranges without touching the machine's.
	if out, err := exec.Command("unshare", "--mount", "true").CombinedOutput(); err != nil {
		testdep.Missing(t, "h2spec needs a mount namespace for a private /etc/hosts (unshare --mount): %v: %s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "h2spec")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/summerwind/h2spec/cmd/h2spec").CombinedOutput(); err != nil {
		t.Fatalf("build h2spec: %v\n%s", err, out)
	}

	c, edgeAddr, caFile := devEdge(t)
	_, host := hostEcho(t, c)
	c.call("POST", "/v1/sandboxes/e2e/urls", `{"port": `+echoPort(t, c)+`, "public": true}`, 200, nil)
	web := edgeClient(t, edgeAddr, caFile, true)
	wait.For(t, 15*time.Second, "the public URL answers", func() bool {
		res, _ := visit(t, web, "GET", "https://"+host+"/")
		return res.StatusCode == 200
	})

	ip, port, _ := strings.Cut(edgeAddr, ":")
	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+ip+" "+host+"\n"), 0o644)
	// timeout is how long h2spec waits for each frame it expects (and
	// for each case's TLS handshake: one that times out ends the run with
	// no report), in seconds; on a 2-core machine under -race, with the
	// rest of the suite beside it, its default of 2 is short.
	h2spec := func(timeout int, sections ...string) ([]h2specResult, []byte) {
		report := filepath.Join(t.TempDir(), "h2spec.xml")
		args := append([]string{`mount --bind "$0" /etc/hosts && exec "$@"`, hosts,
			bin, "--tls", "--insecure", "--strict", "--host", host, "--port", port, "--timeout", strconv.Itoa(timeout), "--junit-report", report}, sections...)
		started := time.Now()
		out, err := exec.Command("unshare", append([]string{"--mount", "--", "sh", "-c"}, args...)...).CombinedOutput()
		t.Logf("h2spec %v took %v", sections, time.Since(started).Round(time.Millisecond))
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("run h2spec: %v", err)
		}
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("h2spec wrote no report (%v): %s", err, out)
		}
		results, err := parseH2Spec(b)
		if err != nil {
			t.Fatal(err)
		}
		return results, out
	}
	// Every case, 5.1.2 last, on its own: it opens 250 streams at once,
	// each a request to the app, and holds them (its window is 0) until
	// the edge refuses the 251st. In loaded runs the requests of the
	// cases after it (6.5.3/1 and 6.9.1/1 each fetch the app's answer
	// first) then waited past the 6 s, seconds after the burst ended:
	// an open question of the edge's recovery from a burst under load
	// (#33), not of conformance, which this test checks. The burst's own
	// refusal gets 30 s: the 250 requests' handlers, each a dial through
	// the tunnel, share the loaded cores with the connection's read loop
	// that refuses the 251st (under -race, at a load of 20 in make
	// test's first phase, it took longer than 6 s once).
	sections := []string{"generic", "hpack", "http2/3", "http2/4", "http2/5.1.1", "http2/5.3", "http2/5.4", "http2/5.5",
		"http2/6", "http2/7", "http2/8"}
	for i := range 13 { // 5.1's own cases, in go.mod's h2spec
		sections = append(sections, fmt.Sprintf("http2/5.1/%d", i+1))
	}
	results, out := h2spec(6, sections...)
	r, o := h2spec(30, "http2/5.1.2")
	results, out = append(results, r...), append(out, o...)
	t.Logf("h2spec ran %d cases", len(results))
	if len(results) < 140 {
		t.Fatalf("h2spec ran %d cases, want at least 140: %s", len(results), out)
	}
	var failed int
	for _, r := range results {
		reason, known := h2specDeviations[r.id]
		switch {
		case r.failed && !known:
			failed++
			t.Errorf("h2spec %s fails: %s\n%s", r.id, r.name, r.detail)
		case !r.failed && known:
			t.Errorf("h2spec %s (%s) passes now: drop it from h2specDeviations (%s)", r.id, r.name, reason)
		case r.failed:
			t.Logf("known deviation %s: %s", r.id, reason)
		}
	}
	for id := range h2specDeviations {
		if !hasCase(results, id) {
			t.Errorf("h2spec has no case %s any more: drop it from h2specDeviations", id)
		}
	}
	if failed > 0 {
		t.Logf("h2spec output:\n%s", out)
	}
}

type h2specResult struct {
	id, name, detail string
	failed           bool
}

// parseH2Spec reads h2spec's JUnit report. A case's id is its group's
// package and its position in the group, as h2spec numbers them.
func parseH2Spec(b []byte) ([]h2specResult, error) {
	var doc struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Name    string `xml:"classname,attr"`
				Failure *struct {
					Content string `xml:",innerxml"`
				} `xml:"failure"`
				Error *struct {
					Content string `xml:",innerxml"`
				} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("h2spec's report: %w", err)
	}
	var out []h2specResult
	for _, s := range doc.Suites {
		for i, c := range s.Cases {
			r := h2specResult{id: s.Package + "/" + strconv.Itoa(i+1), name: c.Name}
			switch {
			case c.Failure != nil:
				r.failed, r.detail = true, c.Failure.Content
			case c.Error != nil:
				r.failed, r.detail = true, c.Error.Content
			case c.Skipped != nil:
				r.failed, r.detail = true, "skipped"
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func hasCase(results []h2specResult, id string) bool {
	for _, r := range results {
		if r.id == id {
			return true
		}
	}
	return false
}
