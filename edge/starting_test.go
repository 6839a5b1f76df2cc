package edge

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// A Starting page's watch: answered by the edge itself (never the app),
// after auth, at once for a page that shows nothing yet, and for one that
// shows the current stage only once the start moves on; ready when the
// sandbox runs and its port answers; failed when the start failed. Over
// the fake exchange and both protocols' adapters.
func TestStartWatch(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"fake", "h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			s, rts, _ := newFakeEdge(t, okApp)
			set := func(sb route.Sandbox) {
				sb.ID, sb.AccountID, sb.DesiredState = "sb1", "a1", store.StateRunning
				rts.mu.Lock()
				rts.boxes["sb1"] = &sb
				rts.mu.Unlock()
				rts.changed.Wake()
			}
			watch := func(seen string, hdr ...field) (answer, startStatus, string) {
				t.Helper()
				hdr = append(hdr, field{"Froog-Start-Watch", seen})
				a, sent := through(t, s, proto, "GET", "app.froog.test", "/page", hdr, "")
				if proto != "fake" { // through gives any 200's body as what the app got: okApp's is "hello"
					sent = ""
					if a.body == "hello" {
						sent = a.body
					}
				}
				var st startStatus
				if a.status == 200 {
					if err := json.Unmarshal([]byte(a.body), &st); err != nil {
						t.Fatalf("the watch's answer %q: %v", a.body, err)
					}
				}
				return a, st, sent
			}
			tok := field{"X-Froog-Url-Token", benchToken}

			if a, _, sent := watch(""); a.status != 401 || sent != "" {
				t.Fatalf("a watch without the token: %d, the app got %q; want 401 and nothing", a.status, sent)
			}
			set(route.Sandbox{State: store.StateStarting, StartStage: "booting: the kernel"})
			a, st, sent := watch("", tok)
			if a.status != 200 || st.Stage != "booting: the kernel" || st.Ready || st.Failed || st.Version == "" || sent != "" {
				t.Fatalf("first watch: %d %+v, the app got %q", a.status, st, sent)
			}
			time.AfterFunc(100*time.Millisecond, func() {
				set(route.Sandbox{State: store.StateStarting, StartStage: "booting: systemd's start-up"})
			})
			began := time.Now()
			_, next, _ := watch(st.Version, tok)
			if next.Stage != "booting: systemd's start-up" || next.Version == st.Version {
				t.Fatalf("a watch of the shown stage: %+v", next)
			}
			if waited := time.Since(began); waited < 50*time.Millisecond {
				t.Fatalf("the watch answered after %v, before the start moved on", waited)
			}
			set(route.Sandbox{State: store.StateRunning, Endpoint: "h:22"})
			if _, st, sent := watch(next.Version, tok); !st.Ready || sent != "" {
				t.Fatalf("a running sandbox whose port answers: %+v, the app got %q", st, sent)
			}
			set(route.Sandbox{State: store.StateError, StartStage: "booting: the kernel"})
			if _, st, _ := watch("", tok); !st.Failed || st.Ready || st.Stage != "booting: the kernel" {
				t.Fatalf("a failed start: %+v", st)
			}
		})
	}
}

// The Starting page shows the stage and lets in its one script by hash:
// the CSP's hash is the page's script's.
func TestStartingPage(t *testing.T) {
	t.Parallel()
	s, rts, _ := newFakeEdge(t, okApp)
	rts.mu.Lock()
	rts.boxes["sb1"] = &route.Sandbox{ID: "sb1", State: store.StateStarting, DesiredState: store.StateRunning, StartStage: "booting: <the kernel>"}
	rts.mu.Unlock()
	p := s.starting(rts.routes["app.froog.test"], 8080, 20*time.Second)
	body := string(p.body(true, "req-1"))
	if !strings.Contains(body, `booting: &lt;the kernel&gt;`) || strings.Contains(body, "<the kernel>") || !strings.Contains(body, `data-waited="20">20 s<`) {
		t.Fatalf("the page does not show the stage, escaped, and the 20 s it was held: %s", body)
	}
	m := regexp.MustCompile(`(?s)<script>(.*)</script>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no script on the Starting page: %s", body)
	}
	sum := sha256.Sum256([]byte(m[1]))
	var csp string
	p.headers(true, func(name, value string) {
		if name == "Content-Security-Policy" {
			csp = value
		}
	})
	if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, "script-src "+want) || !strings.Contains(csp, "connect-src 'self'") {
		t.Fatalf("CSP %q does not let in the page's script (%s) and its watch", csp, want)
	}
	if other := errBadGateway(1); strings.Contains(string(other.body(true, "r")), "<script") {
		t.Fatal("a page other than Starting carries the script")
	}
	queued := startOf(&route.Sandbox{State: store.StateStopped, DesiredState: store.StateRunning}, 80, false)
	if queued.Stage != "queued for a host" {
		t.Fatalf("a start no host has taken yet: %+v", queued)
	}
}

// startOf names the setup while the account's setup runs in a sandbox
// whose port does not answer yet; an answering port is ready all the same.
func TestStartOfSetup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sb      route.Sandbox
		answers bool
		stage   string
		ready   bool
	}{
		{route.Sandbox{State: store.StateRunning, SetupRunning: true}, false, "running its setup; waiting for port 3000 to answer", false},
		{route.Sandbox{State: store.StateRunning}, false, "running; waiting for port 3000 to answer", false},
		{route.Sandbox{State: store.StateRunning, SetupRunning: true}, true, "", true},
	} {
		st := startOf(&c.sb, 3000, c.answers)
		if st.Stage != c.stage || st.Ready != c.ready {
			t.Errorf("%+v, answers %v: stage %q ready %v; want %q %v", c.sb, c.answers, st.Stage, st.Ready, c.stage, c.ready)
		}
	}
	a, b := startOf(&route.Sandbox{State: store.StateRunning, SetupRunning: true}, 3000, false), startOf(&route.Sandbox{State: store.StateRunning}, 3000, false)
	if a.Version == b.Version {
		t.Error("the setup's end does not change the page's version: a watching page would not show it")
	}
}
