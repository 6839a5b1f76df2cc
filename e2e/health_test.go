package e2e_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// The operational endpoints against the real binary: `froogd version`,
// and on every role's admin listener /healthz, /readyz with the role's
// checks and /metrics with froog_build_info.

var adminRE = `admin on (http://\S+) `

// readyz is one /readyz answer: the status code and the checks.
type readyz struct {
	code   int
	Status string
	Checks map[string]string
}

func getReadyz(admin string) readyz {
	var r readyz
	res, err := http.Get(admin + "/readyz")
	if err != nil {
		return r
	}
	defer res.Body.Close()
	r.code = res.StatusCode
	json.NewDecoder(res.Body).Decode(&r)
	return r
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(froogd, arg).Output()
		if err != nil || !regexp.MustCompile(`^froogd \S+ \(revision \S+, go1\.\d+[^)]*\)\n$`).Match(out) {
			t.Errorf("froogd %s: %q %v", arg, out, err)
		}
	}
}

// Each role on its own Postgres: alive and ready; then Postgres stops,
// and every role says it is not ready (and why) while still alive; then
// Postgres is back, and so is readiness. This is what a load balancer, a
// Kubernetes probe or the cluster test reads.
func TestReadiness(t *testing.T) {
	t.Parallel()
	pg := privatePostgres(t)
	db, _, ctlKey, secret := selfHostedOn(t, pg.url())
	caDir := t.TempDir()
	roles := map[string][]string{
		"hostctl": {"hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey},
		"api": {"api", "--database-url", db, "--api-addr", "127.0.0.1:0", "--domain", "froog.test", "--secret-key-file", secret,
			"--control-key-file", ctlKey},
		"edge": {"edge", "--database-url", db, "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test",
			"--ca-dir", caDir, "--control-key-file", ctlKey},
	}
	checks := map[string][]string{"hostctl": {"store", "reconcile"}, "api": {"store"}, "edge": {"store", "routes", "certs", "draining"}}
	admin := map[string]string{}
	for role, args := range roles {
		_, m := start(t, regexp.MustCompile(adminRE), append(args, "--metrics-addr", "127.0.0.1:0")...)
		admin[role] = m[1]
	}
	for role, a := range admin {
		wait.For(t, 15*time.Second, role+" is ready", func() bool { return getReadyz(a).code == 200 })
		r := getReadyz(a)
		if r.Status != "ready" || len(r.Checks) != len(checks[role]) {
			t.Errorf("%s /readyz: %+v, want ready with checks %v", role, r, checks[role])
		}
		for _, c := range checks[role] {
			if r.Checks[c] != "ok" {
				t.Errorf("%s /readyz: check %s is %q", role, c, r.Checks[c])
			}
		}
		res, err := http.Get(a + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !regexp.MustCompile(`froog_build_info\{[^}]*role="` + role + `"[^}]*\} 1`).Match(b) {
			t.Errorf("%s /metrics has no froog_build_info for its role", role)
		}
	}

	pg.stop()
	for role, a := range admin {
		wait.For(t, 20*time.Second, role+" says it is not ready without Postgres", func() bool {
			r := getReadyz(a)
			return r.code == 503 && r.Status == "not ready" && r.Checks["store"] != "ok"
		})
		if res, err := http.Get(a + "/healthz"); err != nil || res.StatusCode != 200 {
			t.Errorf("%s /healthz without Postgres: %v %v, want 200 (alive, not ready)", role, res, err)
		}
	}
	wait.For(t, 20*time.Second, "the edge's route table and hostctl say they lost the feed", func() bool {
		return getReadyz(admin["edge"]).Checks["routes"] != "ok" && getReadyz(admin["hostctl"]).Checks["reconcile"] != "ok"
	})
	r := getReadyz(admin["edge"])
	t.Logf("edge without Postgres: %+v", r)
	for _, v := range r.Checks {
		if strings.Contains(v, "postgres://") {
			t.Errorf("/readyz shows the database URL: %q", v)
		}
	}

	pg.start()
	for role, a := range admin {
		wait.For(t, 30*time.Second, role+" is ready again", func() bool { return getReadyz(a).code == 200 })
	}
}

// Under systemd (Type=notify units), froogd says READY=1 on the notify
// socket once it serves, and STOPPING=1 when it begins to stop.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := ln.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	p := startDev(t, devOptions{env: []string{"NOTIFY_SOCKET=" + sock}}).p
	for _, want := range []string{"READY=1", "STOPPING=1"} {
		select {
		case msg := <-got:
			if msg != want {
				t.Fatalf("notify: %q, want %q", msg, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("no %s on the notify socket", want)
		}
		if want == "READY=1" {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
}
