package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// Snapshots end to end, against the real binary with both stores (the
// local driver): a saved snapshot forked with count 3 gives three
// sandboxes with its files; a restore rolls a file back; with the
// hostctl clock moved an hour at a time (FROOG_TEST_CLOCK_FILE), hourly
// snapshots are taken and only the newest 3 automatic ones are kept.
func TestSnapshotsEndToEnd(t *testing.T) {
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		d := startDev(t, devOptions{clock: true})
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("froogd dev's log:\n%s", tail(noRequests(d.p.stderr.String()), 6000))
			}
		})
		snapshotWalkthrough(t, d.c, d.clock, 30*time.Second)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, key, ctlKey, secret := selfHosted(t)
		clock := clockFile(t)
		cmd := exec.Command(froogd, "hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey)
		cmd.Env = append(os.Environ(), "FROOG_TEST_CLOCK_FILE="+clock)
		hc, _ := startCmd(t, regexp.MustCompile(`hostctl h1 running`), cmd, cmd.Args[1:])
		api, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
			"--domain", "froogusercontent.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("hostctl's log:\n%s\napi's log:\n%s", tail(hc.stderr.String(), 6000), tail(api.stderr.String(), 3000))
			}
		})
		snapshotWalkthrough(t, client{t: t, base: m[1], key: key}, clock, 30*time.Second)
	})
}

// tail is the end of a log, up to n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// clockFile is a FROOG_TEST_CLOCK_FILE at no offset.
func clockFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(path, []byte("0s"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type snapshotJSON struct {
	ID, Name, Reason, Status, Error string
	Saved                           bool
}

// cat is the file f.txt in the sandbox's home.
func cat(t *testing.T, c client, name string) string {
	t.Helper()
	var r struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	c.call("POST", "/v1/sandboxes/"+name+"/exec", `{"command": "cat ~/f.txt"}`, 200, &r)
	return strings.TrimSpace(r.Stdout)
}

func write(t *testing.T, c client, name, content string) {
	t.Helper()
	var r struct {
		ExitCode int `json:"exit_code"`
	}
	c.call("POST", "/v1/sandboxes/"+name+"/exec", fmt.Sprintf(`{"command": "echo %s > ~/f.txt"}`, content), 200, &r)
	if r.ExitCode != 0 {
		t.Fatalf("write f.txt in %s: exit %d", name, r.ExitCode)
	}
}

// snapshotWalkthrough is the snapshots' story through the API; within
// is how long a start may take (seconds locally, more for VMs under TCG).
func snapshotWalkthrough(t *testing.T, c client, clock string, within time.Duration) {
	// ttl_secs 0: the test moves hostctl's clock by hours.
	c.call("POST", "/v1/sandboxes", `{"name": "src", "ttl_secs": 0}`, 202, nil)
	runsWithin(t, c, "src", within)
	write(t, c, "src", "saved-state")

	// A saved snapshot, by name.
	var sn snapshotJSON
	c.call("POST", "/v1/sandboxes/src/snapshots", `{"label": "base"}`, 202, &sn)
	wait.For(t, within, "the saved snapshot is available", func() bool {
		c.call("GET", "/v1/saved-snapshots/base", "", 200, &sn)
		return sn.Status == "available" || sn.Status == "failed"
	})
	if sn.Status != "available" || !sn.Saved || sn.Name != "base" {
		t.Fatalf("saved snapshot: %+v", sn)
	}
	write(t, c, "src", "changed-later")

	// Forked with count 3: each copy has the snapshot's files.
	var copies []struct{ Name string }
	c.call("POST", "/v1/sandboxes/src/fork", `{"name": "kid", "snapshot": "base", "count": 3}`, 202, &copies)
	if len(copies) != 3 {
		t.Fatalf("copies: %+v", copies)
	}
	for i, k := range copies {
		if want := fmt.Sprintf("kid-%d", i+1); k.Name != want {
			t.Fatalf("copy %d is %s, want %s", i, k.Name, want)
		}
		runsWithin(t, c, k.Name, within)
		if got := cat(t, c, k.Name); got != "saved-state" {
			t.Fatalf("%s has f.txt %q, want the snapshot's", k.Name, got)
		}
	}

	// A restore rolls the file back, and keeps what it replaced.
	c.call("POST", "/v1/sandboxes/src/restore", `{"snapshot": "base"}`, 202, nil)
	runsWithin(t, c, "src", within)
	if got := cat(t, c, "src"); got != "saved-state" {
		t.Fatalf("after the restore f.txt is %q", got)
	}
	var list []snapshotJSON
	c.call("GET", "/v1/sandboxes/src/snapshots", "", 200, &list)
	if len(list) != 2 || list[0].Reason != "restore" || list[1].ID != sn.ID {
		t.Fatalf("snapshots after the restore: %+v", list)
	}

	// The saved snapshot as a template: a new sandbox from it.
	c.call("POST", "/v1/sandboxes", `{"name": "tpl", "from": "base", "ttl_secs": 0}`, 202, nil)
	runsWithin(t, c, "tpl", within)
	if got := cat(t, c, "tpl"); got != "saved-state" {
		t.Fatalf("a sandbox from the saved snapshot has f.txt %q", got)
	}

	// Hourly, with the clock moved: 4 hours give 4 hourly snapshots, of
	// which (with the restore's) the newest 3 stay.
	for _, name := range []string{"kid-1", "kid-2", "kid-3", "tpl"} {
		c.call("DELETE", "/v1/sandboxes/"+name, "", 202, nil)
	}
	newest := list[0].ID
	for h := 1; h <= 4; h++ {
		write(t, c, "src", fmt.Sprintf("hour-%d", h))
		if err := os.WriteFile(clock, []byte(fmt.Sprintf("%dh%ds", h, h)), 0o600); err != nil {
			t.Fatal(err)
		}
		wantAuto := min(h+1, 3)
		wait.For(t, within, fmt.Sprintf("hour %d's snapshot", h), func() bool {
			list = nil // decoded afresh: reason is omitted for saved ones
			c.call("GET", "/v1/sandboxes/src/snapshots", "", 200, &list)
			var auto []snapshotJSON
			for _, s := range list {
				if !s.Saved {
					auto = append(auto, s)
				}
			}
			return len(auto) == wantAuto && auto[0].ID != newest && auto[0].Reason == "hourly" && auto[0].Status == "available"
		})
		newest = list[0].ID
	}
	var reasons []string
	for _, s := range list {
		reasons = append(reasons, s.Reason)
	}
	if fmt.Sprint(reasons) != "[hourly hourly hourly ]" { // and the saved one, last
		t.Fatalf("after 4 hours: %v", reasons)
	}
	// The newest hourly one holds hour 4's file: a fork of latest says so.
	c.call("POST", "/v1/sandboxes/src/fork", `{"name": "from-latest", "snapshot": "latest"}`, 202, nil)
	runsWithin(t, c, "from-latest", within)
	if got := cat(t, c, "from-latest"); got != "hour-4" {
		t.Fatalf("the newest hourly snapshot has f.txt %q, want hour-4", got)
	}

	var audit struct {
		Events []struct{ Action string } `json:"events"`
	}
	c.call("GET", "/v1/audit?limit=100", "", 200, &audit)
	seen := map[string]int{}
	for _, e := range audit.Events {
		seen[e.Action]++
	}
	if seen["snapshot.save"] != 1 || seen["sandbox.restore"] != 1 || seen["sandbox.fork"] != 4 {
		t.Fatalf("audit: %v", seen)
	}
}

// noRequests drops the access log's lines.
func noRequests(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, `"msg":"request"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
