package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/guest"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// The test binary is froog-desktop when called by that name: the driver's
// default DesktopExe is this binary, as it is froogd in production.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == guest.Name {
		os.Exit(guest.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// speaksRFB says whether the port's VNC server takes a client through
// the handshake.
func speaksRFB(port int) bool {
	c, err := testkit.DialRFB(port)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Two sandboxes' desktops run at once on their own displays and ports,
// and a sandbox's stop ends its desktop, not the other's.
func TestDesktops(t *testing.T) {
	if _, err := exec.LookPath("Xvnc"); err != nil {
		testdep.Missing(t, "Xvnc is not installed (deploy/testdeps.sh installs tigervnc-standalone-server)")
	}
	r := newRig(t)
	boxes := []*store.Sandbox{r.sb, {ID: store.NewID("sbx"), Name: "box2"}}
	var states []guest.State
	for _, sb := range boxes {
		ep, err := r.drv.Start(context.Background(), sb, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := r.client(ep)
		if out, _, _ := run(t, c, "command -v froog-desktop", nil, ""); !strings.HasSuffix(strings.TrimSpace(out), "/.bin/froog-desktop") {
			t.Fatalf("froog-desktop on PATH: %q", out)
		}
		out, errs, code := run(t, c, "froog-desktop start", nil, "")
		if code != 0 {
			t.Fatalf("froog-desktop start in %s: exit %d: %s", sb.Name, code, errs)
		}
		var st guest.State
		if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Running {
			t.Fatalf("froog-desktop start printed %q (%v)", out, err)
		}
		// Its state is in the sandbox's home.
		if _, err := os.Stat(filepath.Join(r.drv.Home(sb), ".local/state/froog-desktop/desktop.json")); err != nil {
			t.Errorf("state file: %v", err)
		}
		states = append(states, st)
	}
	a, b := states[0], states[1]
	if a.Display == b.Display || a.VNCPort == b.VNCPort {
		t.Fatalf("two sandboxes share a screen: %+v and %+v", a, b)
	}
	for _, st := range states {
		if !speaksRFB(st.VNCPort) {
			t.Fatalf("port %d does not speak RFB", st.VNCPort)
		}
	}

	pids := guest.GroupPids(a.PID)
	if len(pids) < 2 {
		t.Fatalf("the first desktop's group has %v, want the supervisor and Xvnc", pids)
	}
	if err := r.drv.Stop(context.Background(), boxes[0]); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("process %d of the stopped sandbox's desktop is alive", p)
		}
	}
	wait.For(t, 5*time.Second, "the stopped sandbox's VNC port closes", func() bool { return !speaksRFB(a.VNCPort) })
	if !speaksRFB(b.VNCPort) || len(guest.GroupPids(b.PID)) < 2 {
		t.Fatalf("the other sandbox's desktop went with the first's stop")
	}
	// A cold start after the stop gets a desktop again.
	c := r.client(r.start())
	if _, errs, code := run(t, c, "froog-desktop status", nil, ""); code != guest.ExitNotRunning {
		t.Fatalf("status after the stop: exit %d (%s), want %d", code, errs, guest.ExitNotRunning)
	}
	if out, errs, code := run(t, c, "froog-desktop start && froog-desktop stop", nil, ""); code != 0 {
		t.Fatalf("start and stop after a cold start: exit %d: %s %s", code, out, errs)
	}
}

// A stop kills the process groups that the sandbox's desktop state files
// name, members that dropped the sandbox's tag included; but only groups
// whose leader is the sandbox's, since its commands can write those files.
func TestStopKillsDesktopGroups(t *testing.T) {
	r := newRig(t)
	c := r.client(r.start())
	home := r.drv.Home(r.sb)
	// A stand-in supervisor: a group leader with a child without the tag.
	run(t, c, `setsid sh -c 'env -u FROOG_SANDBOX_ID sleep 300 & echo $! > untagged.pid; exec sleep 301' >/dev/null 2>&1 </dev/null & echo $! > leader.pid`, nil, "")
	var leader, untagged int
	wait.For(t, 10*time.Second, "the pids are written", func() bool {
		a, _ := os.ReadFile(filepath.Join(home, "leader.pid"))
		b, _ := os.ReadFile(filepath.Join(home, "untagged.pid"))
		return sscan(string(a), &leader) && sscan(string(b), &untagged)
	})
	// Someone else's group, named by a hostile state file.
	stranger := exec.Command("sleep", "300")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stranger.Process.Kill(); stranger.Wait() }()

	dir := guest.StateDir(home, "")
	os.MkdirAll(dir, 0o700)
	write := func(kind string, pid int) {
		b := fmt.Sprintf(`{"kind":%q,"running":true,"display":":10","vnc_port":5910,"pid":%d,"pid_start":1}`, kind, pid)
		if err := os.WriteFile(filepath.Join(dir, kind+".json"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("desktop", leader)
	write("browser", stranger.Process.Pid)
	if err := r.drv.Stop(context.Background(), r.sb); err != nil {
		t.Fatal(err)
	}
	if alive(leader) || alive(untagged) {
		t.Errorf("after Stop: leader alive %v, its untagged child alive %v; want both dead", alive(leader), alive(untagged))
	}
	if !alive(stranger.Process.Pid) {
		t.Errorf("Stop killed a group that was not the sandbox's")
	}
}
