package e2e_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// A sandbox made with snapshots off, end to end against the real binary
// on both stores (the local driver): a stop erases it (the stop completes,
// GET answers 404, its folder is gone, no snapshot of it exists, the audit
// log says why, its name is free), and so does its auto-stop timer (with
// hostctl's clock moved); it has no fork at all; a fork with snapshots:
// false is a copy its stop erases, and its source stays. Then a saved
// snapshot as a template: a sandbox from it has its source's variables
// in exec, unless its create sent its own.
func TestSnapshotsOffEndToEnd(t *testing.T) {
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		d := startDev(t, devOptions{clock: true})
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("froogd dev's log:\n%s", tail(noRequests(d.p.stderr.String()), 6000))
			}
		})
		c := d.c
		eraseWalkthrough(t, c, d.clock, filepath.Join(d.data, "sandboxes"))
		templateEnvWalkthrough(t, c)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, key, ctlKey, secret := selfHosted(t)
		clock, data := clockFile(t), t.TempDir()
		cmd := exec.Command(froogd, "hostctl", "--database-url", db, "--host-name", "h1", "--data", data, "--control-key-file", ctlKey)
		cmd.Env = append(os.Environ(), "FROOG_TEST_CLOCK_FILE="+clock)
		hc, _ := startCmd(t, regexp.MustCompile(`hostctl h1 running`), cmd, cmd.Args[1:])
		api, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
			"--domain", "froogusercontent.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("hostctl's log:\n%s\napi's log:\n%s", tail(hc.stderr.String(), 6000), tail(api.stderr.String(), 3000))
			}
		})
		c := client{t: t, base: m[1], key: key}
		eraseWalkthrough(t, c, clock, filepath.Join(data, "sandboxes"))
		templateEnvWalkthrough(t, c)
	})
}

// eraseWalkthrough is snapshots off's story through the API; folders is
// where the local driver keeps each sandbox's folder (its disk).
func eraseWalkthrough(t *testing.T, c client, clock, folders string) {
	const within = 30 * time.Second
	var sb struct{ ID, Name string }
	c.call("POST", "/v1/sandboxes", `{"name": "off", "snapshots": false, "ttl_secs": 0}`, 202, &sb)
	runsWithin(t, c, "off", within)
	write(t, c, "off", "private")
	folder := filepath.Join(folders, sb.ID)
	if _, err := os.Stat(folder); err != nil {
		t.Fatalf("a running sandbox's folder: %v", err)
	}
	c.call("POST", "/v1/sandboxes/off/fork", `{"name": "copy"}`, 409, nil)
	c.call("POST", "/v1/sandboxes/off/snapshots", `{"label": "x"}`, 409, nil)

	// The stop erases it.
	var stop struct{ ID, Status string }
	c.call("POST", "/v1/sandboxes/off/stop", "", 202, &stop)
	wait.For(t, within, "the stop completed", func() bool {
		c.call("GET", "/v1/stops/"+stop.ID, "", 200, &stop)
		return stop.Status != "pending"
	})
	if stop.Status != "completed" {
		t.Fatalf("the stop: %+v", stop)
	}
	c.call("GET", "/v1/sandboxes/off", "", 404, nil)
	if _, err := os.Stat(folder); !os.IsNotExist(err) {
		t.Fatalf("the erased sandbox's folder: %v", err)
	}
	var snaps []struct{ Sandbox string }
	c.call("GET", "/v1/snapshots", "", 200, &snaps)
	if len(snaps) != 0 {
		t.Fatalf("snapshots after the erase: %+v", snaps)
	}
	// The name is free again.
	c.call("POST", "/v1/sandboxes", `{"name": "off", "ttl_secs": 0}`, 202, nil)

	// A fork with snapshots: false is a copy its stop erases; its source
	// stays as it was.
	c.call("POST", "/v1/sandboxes", `{"name": "src", "ttl_secs": 0}`, 202, nil)
	runsWithin(t, c, "src", within)
	write(t, c, "src", "source")
	var kid struct{ ID string }
	c.call("POST", "/v1/sandboxes/src/fork", `{"name": "kid", "snapshots": false}`, 202, &kid)
	runsWithin(t, c, "kid", within)
	if got := cat(t, c, "kid"); got != "source" {
		t.Fatalf("the fork has f.txt %q", got)
	}
	c.call("POST", "/v1/sandboxes/kid/fork", `{"name": "grandkid"}`, 409, nil)
	c.call("POST", "/v1/sandboxes/kid/stop", "", 202, &stop)
	wait.For(t, within, "the fork erased", func() bool {
		c.call("GET", "/v1/stops/"+stop.ID, "", 200, &stop)
		return stop.Status != "pending"
	})
	c.call("GET", "/v1/sandboxes/kid", "", 404, nil)
	if _, err := os.Stat(filepath.Join(folders, kid.ID)); stop.Status != "completed" || !os.IsNotExist(err) {
		t.Fatalf("the fork's stop %+v, its folder: %v", stop, err)
	}
	if got := cat(t, c, "src"); got != "source" {
		t.Fatalf("the source has f.txt %q after its fork was erased", got)
	}

	// The auto-stop timer erases too.
	var timed struct{ ID string }
	c.call("POST", "/v1/sandboxes", `{"name": "timed", "snapshots": false, "ttl_secs": 3600}`, 202, &timed)
	runsWithin(t, c, "timed", within)
	if err := os.WriteFile(clock, []byte("1h1m"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Gone from the API first (it is deleted before its disk goes), then
	// from the disk.
	wait.For(t, within, "the auto-stopped sandbox erased, folder and all", func() bool {
		_, err := os.Stat(filepath.Join(folders, timed.ID))
		return gone(t, c, "timed") && os.IsNotExist(err)
	})

	var audit struct {
		Events []struct {
			Action, Target, Actor string
			Detail                map[string]string
		}
	}
	c.call("GET", "/v1/audit?limit=100", "", 200, &audit)
	erased := map[string]string{}
	for _, e := range audit.Events {
		if e.Action == "sandbox.delete" && e.Actor == "snapshots-off" && e.Detail["reason"] != "" {
			erased[e.Target] = e.Detail["stop_id"]
		}
	}
	if len(erased) != 3 || erased["off"] == "" || erased["kid"] != stop.ID || erased["timed"] == "" {
		t.Fatalf("the audit log's erases: %v", erased)
	}
}

// gone reports whether GET /v1/sandboxes/NAME answers 404 (anything but
// 200 or 404 fails the test).
func gone(t *testing.T, c client, name string) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", c.base+"/v1/sandboxes/"+name, nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 && res.StatusCode != 404 {
		t.Fatalf("GET %s: %d", name, res.StatusCode)
	}
	return res.StatusCode == 404
}

// templateEnvWalkthrough: a sandbox from a saved snapshot gets its
// source's own variables (as saved), unless its create sends its own.
func templateEnvWalkthrough(t *testing.T, c client) {
	const within = 30 * time.Second
	c.call("POST", "/v1/sandboxes", `{"name": "envsrc", "ttl_secs": 0, "env": {"TENANT": "t-42"}}`, 202, nil)
	runsWithin(t, c, "envsrc", within)
	var sn snapshotJSON
	c.call("POST", "/v1/sandboxes/envsrc/snapshots", `{"label": "tenant-base"}`, 202, &sn)
	wait.For(t, within, "the saved snapshot is available", func() bool {
		c.call("GET", "/v1/saved-snapshots/tenant-base", "", 200, &sn)
		return sn.Status == "available" || sn.Status == "failed"
	})
	echo := func(name string) string {
		var r struct{ Stdout string }
		c.call("POST", "/v1/sandboxes/"+name+"/exec", `{"command": "echo \"[$TENANT]\""}`, 200, &r)
		return strings.TrimSpace(r.Stdout)
	}
	for want, body := range map[string]string{
		"[t-42]": `{"name": "tpl-env", "from": "tenant-base", "ttl_secs": 0}`,
		"[t-7]":  `{"name": "tpl-own", "from": "tenant-base", "ttl_secs": 0, "env": {"TENANT": "t-7"}}`,
	} {
		var sb struct{ Name string }
		c.call("POST", "/v1/sandboxes", body, 202, &sb)
		runsWithin(t, c, sb.Name, within)
		if got := echo(sb.Name); got != want {
			t.Fatalf("%s: TENANT is %s, want %s", sb.Name, got, want)
		}
	}
}

// Snapshots off on the qemu driver (the test guest under TCG here): the
// stop erases the VM with no warm window — no QEMU process and no folder
// (disk, saved memory) left — and the sandbox.
func TestQEMUSnapshotsOffThroughTheAPI(t *testing.T) {
	t.Parallel() // in the VM phase, beside the other VM tests only
	tiny := tinyGuest(t)
	data := t.TempDir()
	// QEMU outlives froogd by design: a VM this test left is ended.
	t.Cleanup(func() {
		for _, pid := range qemuOf(filepath.Join(data, "vms")) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cmd := exec.Command(froogd, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
		"--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", filepath.Join(tiny, "initramfs.gz"),
		"--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1")
	p, m := startCmd(t, devReady, cmd, cmd.Args[1:])
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("froogd dev's log:\n%s", tail(noRequests(p.stderr.String()), 8000))
		}
	})
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	var sb struct{ ID string }
	c.call("POST", "/v1/sandboxes", `{"name": "off", "snapshots": false, "ttl_secs": 0}`, 202, &sb)
	runsWithin(t, c, "off", 3*time.Minute)
	write(t, c, "off", "private")
	folder := filepath.Join(data, "vms", "sandboxes", sb.ID)
	if len(qemuOf(folder)) == 0 {
		t.Fatal("no QEMU process names the sandbox's folder")
	}
	var stop struct{ ID, Status string }
	c.call("POST", "/v1/sandboxes/off/stop", "", 202, &stop)
	wait.For(t, time.Minute, "the stop completed", func() bool {
		c.call("GET", "/v1/stops/"+stop.ID, "", 200, &stop)
		return stop.Status != "pending"
	})
	c.call("GET", "/v1/sandboxes/off", "", 404, nil)
	if _, err := os.Stat(folder); stop.Status != "completed" || !os.IsNotExist(err) {
		t.Fatalf("the stop %+v; the VM's folder: %v", stop, err)
	}
	if len(qemuOf(folder)) != 0 {
		t.Fatal("the erased sandbox's QEMU still runs")
	}
	files, _ := filepath.Glob(filepath.Join(data, "vms", "snapshots", "*"))
	if len(files) != 0 {
		t.Fatalf("snapshot files of a sandbox with snapshots off: %v", files)
	}
}

// qemuOf lists the processes whose command line names folder.
func qemuOf(folder string) []int {
	var pids []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), folder+"/") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			pids = append(pids, pid)
		}
	}
	return pids
}
