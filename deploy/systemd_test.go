package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testimage"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/pg/pgtest"
)

// guestScript installs the package in the guest, configures the roles on
// the host's Postgres (10.0.2.2 is the host's loopback under QEMU's
// user-mode networking), with the edge on ports 443 and 80 and the local
// CA, and hostctl with the local driver (no VMs inside the VM), and
// enables and starts all four units.
const guestScript = `set -eu
dpkg -i /tmp/froogd.deb >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; exit 1; }
install -m 0640 -g froog /dev/null /etc/froog/secret.key
head -c 32 /dev/urandom > /etc/froog/secret.key
ssh-keygen -q -t ed25519 -N '' -C 'froog control plane' -f /etc/froog/control_key
chgrp froog /etc/froog/control_key && chmod 0640 /etc/froog/control_key
printf 'FROOG_DATABASE_URL=%s\nFROOG_DOMAIN=froog.test\n' "$1" >> /etc/froog/froog.env
echo FROOG_CA_DIR=/var/lib/froog/ca >> /etc/froog/edge.env
echo FROOG_DRIVER=local >> /etc/froog/hostctl.env
systemctl enable --now froogd-migrate froogd-api froogd-edge froogd-hostctl 2>&1
`

// checkScript asks each role's /readyz and, with an API key made by
// froogd admin, has the API create a sandbox that hostctl then runs (the
// local driver, under the hostctl unit's sandboxing).
const checkScript = `import json, sys, urllib.request
out = {}
for role, port in (("edge", 9101), ("api", 9102), ("hostctl", 9103)):
    try:
        r = urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=5)
        out[role] = json.load(r)["status"]
    except Exception as e:
        out[role] = "error: %s" % e
print(json.dumps(out))
`

// The package on a real Debian system, booted: Debian 13 with systemd
// (the OS image deploy/testdeps.sh builds), under QEMU. The four units
// start under their hardening as the froog user; every role says it is
// ready; the edge binds 443 and 80 as froog with CAP_NET_BIND_SERVICE and
// no other capability; a sandbox created through the API runs (hostctl
// under its unit); stopping the edge drains it and exits cleanly.
func TestPackageUnderSystemd(t *testing.T) {
	if os.Getuid() != 0 {
		testdep.Missing(t, "the package's build and the VM's networking want root; make test runs as root")
	}
	t.Parallel() // the guest boots while TestDebianPackage builds the package
	img, err := qemu.LoadImage(testimage.Dir(t, "debian-13"))
	if err != nil {
		t.Fatal(err)
	}
	db := strings.Replace(pgtest.URLWithSchema(pgtest.Schema(t)), "127.0.0.1", "10.0.2.2", 1)
	if !strings.Contains(db, "10.0.2.2") {
		t.Fatalf("the test database %s is not on 127.0.0.1: the guest reaches the host's loopback only", db)
	}
	signer := testkit.NewKey(t)
	dir := t.TempDir()
	d, err := qemu.New(qemu.Options{Dir: dir, Images: map[string]qemu.Image{"debian-13": img}, ControlKey: signer,
		DiskSize: 4 << 30, Sizes: map[string]qemu.Size{"default": {CPUs: 2, MemoryMB: 1024}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qemutest.StopAll(d, dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	booted := time.Now()
	sb := &store.Sandbox{ID: "sbx_pkgtest", Name: "pkgtest", Size: "default", OS: "debian-13"}
	ep, err := d.Start(ctx, sb, nil)
	if err != nil {
		t.Fatalf("boot Debian 13: %v", err)
	}
	t.Logf("Debian 13 booted in %v", time.Since(booted).Round(time.Second))
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", ep.Host+":"+strconv.Itoa(ep.Port), &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// run runs a command as root in the guest with stdin.
	run := func(stdin []byte, cmd string) (string, error) {
		s, err := c.NewSession()
		if err != nil {
			return "", err
		}
		defer s.Close()
		s.Stdin = bytes.NewReader(stdin)
		out, err := s.CombinedOutput("sudo " + cmd)
		return string(out), err
	}
	must := func(stdin []byte, cmd string) string {
		t.Helper()
		out, err := run(stdin, cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return out
	}
	debBytes, err := os.ReadFile(buildDeb(t))
	if err != nil {
		t.Fatal(err)
	}
	must(debBytes, "tee /tmp/froogd.deb >/dev/null")
	must([]byte(guestScript), "bash -s "+shellQuote(db))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run(nil, "journalctl --no-pager -n 60 -u froogd-migrate -u froogd-api -u froogd-edge -u froogd-hostctl")
			t.Logf("the units' journal:\n%s", out)
		}
	})

	var status string
	if !wait.Until(2*time.Minute, func() bool {
		status, _ = run([]byte(checkScript), "python3 -")
		return strings.TrimSpace(status) == `{"edge": "ready", "api": "ready", "hostctl": "ready"}`
	}) {
		t.Fatalf("the roles under systemd never all said ready: %s", status)
	}
	for _, u := range []string{"migrate", "api", "edge", "hostctl"} {
		out := must(nil, "systemctl show -p ActiveState -p SubState -p Result -p NRestarts -p User froogd-"+u)
		want := "ActiveState=active\n"
		if !strings.Contains(out, want) || !strings.Contains(out, "Result=success") || !strings.Contains(out, "NRestarts=0") || !strings.Contains(out, "User=froog") {
			t.Errorf("froogd-%s: %s", u, out)
		}
	}
	// The processes run as froog; the edge holds 443 and 80 with only
	// CAP_NET_BIND_SERVICE (bit 10) effective.
	if out := must(nil, "ps -o user= -C froogd"); strings.TrimSpace(strings.ReplaceAll(out, "froog\n", "")) != "" || strings.Count(out, "froog") != 3 {
		t.Errorf("froogd processes' users: %q, want froog three times", out)
	}
	if out := must(nil, "ss -Hltnp"); !strings.Contains(out, ":443 ") || !strings.Contains(out, ":80 ") {
		t.Errorf("the edge does not listen on 443 and 80: %s", out)
	}
	capEff := must(nil, `sh -c 'grep CapEff /proc/$(systemctl show -p MainPID --value froogd-edge)/status'`)
	if !strings.Contains(capEff, fmt.Sprintf("%016x", 1<<10)) {
		t.Errorf("the edge's effective capabilities: %q, want CAP_NET_BIND_SERVICE alone", capEff)
	}

	// A sandbox through the API, run by hostctl under its unit.
	env := "FROOG_DATABASE_URL=" + shellQuote(db)
	acct := strings.TrimSpace(must(nil, "-u froog env "+env+" froogd admin create-account --name acme"))
	key := strings.TrimSpace(must(nil, "-u froog env "+env+" froogd admin api-key create --account "+acct+" --preset admin"))
	api := `import json, sys, time, urllib.request
key = sys.argv[1]
def call(method, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:8080" + path, method=method, data=json.dumps(body).encode() if body else None,
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=10))
call("POST", "/v1/sandboxes", {"name": "in-systemd"})
for _ in range(300):
    sb = call("GET", "/v1/sandboxes/in-systemd")
    if sb["state"] in ("running", "error"): break
    time.sleep(0.2)
print(sb["state"], sb.get("error", ""))
r = call("POST", "/v1/sandboxes/in-systemd/exec", {"command": "echo hi from $(whoami)"})
print(r["stdout"].strip())
`
	if out := must([]byte(api), "python3 - "+key); !strings.HasPrefix(out, "running") || !strings.Contains(out, "hi from froog") {
		t.Errorf("a sandbox through the API under systemd: %q, want running and the command's output", out)
	}

	// Stopping the edge drains it and ends cleanly.
	must(nil, "systemctl stop froogd-edge")
	if out := must(nil, "systemctl show -p Result -p ExecMainStatus froogd-edge"); !strings.Contains(out, "Result=success") || !strings.Contains(out, "ExecMainStatus=0") {
		t.Errorf("the edge's stop: %s", out)
	}
	if out := must(nil, "journalctl --no-pager -u froogd-edge -o cat"); !strings.Contains(out, `"msg":"edge draining"`) {
		t.Errorf("the edge's journal does not say it drained:\n%s", out)
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
