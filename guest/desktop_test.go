package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// The test binary is froog-desktop too when called by that name: the
// supervisor that start spawns is this binary again.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == Name {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// cli runs froog-desktop with home as HOME.
func cli(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	return cliIn(t, home, "", []string{"PATH=" + os.Getenv("PATH")}, args...)
}

// cliIn runs froog-desktop with stdin and extra environment.
func cliIn(t *testing.T, home, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: exe, Args: append([]string{Name}, args...), Dir: home,
		Env: cliEnv(home, env...), Stdin: strings.NewReader(stdin)}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("froog-desktop %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// cliEnv is the environment the tests run froog-desktop in: HOME, LANG,
// the race detector's options as this run has them (make test sets
// GORACE so that a race-built binary does not sleep a second as it
// exits; the supervisor is this binary too), and extra.
func cliEnv(home string, extra ...string) []string {
	env := []string{"HOME=" + home, "LANG=C.UTF-8"}
	if v, ok := os.LookupEnv("GORACE"); ok {
		env = append(env, "GORACE="+v)
	}
	return append(env, extra...)
}

// start runs froog-desktop start with args and returns what it printed.
func start(t *testing.T, home string, args ...string) State {
	t.Helper()
	out, errs, code := cli(t, home, append([]string{"start"}, args...)...)
	if code != 0 {
		t.Fatalf("start %v: exit %d: %s", args, code, errs)
	}
	return parseState(t, out)
}

func needXvnc(t *testing.T) {
	t.Helper()
	if !have("Xvnc") && !have("Xtigervnc") {
		testdep.Missing(t, "Xvnc is not installed (deploy/testdeps.sh installs tigervnc-standalone-server)")
	}
}

func parseState(t *testing.T, out string) State {
	t.Helper()
	var st State
	if err := json.Unmarshal([]byte(out), &st); err != nil || !strings.HasSuffix(out, "}\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("output %q: want one line of JSON (%v)", out, err)
	}
	return st
}

func commOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func TestDesktopStartStatusStop(t *testing.T) {
	testdep.Short(t, "starts real desktops (Xvnc, XFCE): ~30 s")
	needXvnc(t)
	home := t.TempDir()
	t.Cleanup(func() { cli(t, home, "stop") })

	st := start(t, home)
	if st.Kind != KindDesktop || !st.Running || st.Display != ":"+strconv.Itoa(st.VNCPort-VNCBase) || st.PID <= 0 {
		t.Fatalf("start printed %+v", st)
	}
	// The port speaks RFB on loopback, and only there.
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(st.VNCPort)))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	v := make([]byte, 12)
	if _, err := c.Read(v); err != nil || !strings.HasPrefix(string(v), "RFB 003.00") || v[11] != '\n' {
		t.Fatalf("read %q, %v; want RFB 003.00x", v, err)
	}
	c.Close()
	if ln, err := listenTCP("[::1]", st.VNCPort); err == nil {
		ln.Close() // ::1 free: the server is on 127.0.0.1 only
	} else if !strings.Contains(err.Error(), "cannot assign") {
		t.Errorf("the VNC port is taken on ::1 too: %v", err)
	}

	// start again and status: the same screen.
	if again := start(t, home); again != st {
		t.Fatalf("second start: %+v, want %+v", again, st)
	}
	if out, _, code := cli(t, home, "status"); code != 0 || parseState(t, out) != st {
		t.Fatalf("status: exit %d, %q; want %+v", code, out, st)
	}

	// What is drawn on the display is what VNC shows.
	display := []string{"DISPLAY=" + st.Display}
	xsetroot := exec.Command("xsetroot", "-solid", "#00ff00")
	xsetroot.Env = append(os.Environ(), display...)
	if b, err := xsetroot.CombinedOutput(); err != nil {
		t.Fatalf("xsetroot: %v: %s", err, b)
	}
	pixelIs(t, st.VNCPort, [3]byte{0, 255, 0}, 5*time.Second)

	// The wallpaper: a valid PNG shows within 2 s (and a bit for a busy
	// machine); an invalid one is ignored and logged; without one, the
	// plain background comes back.
	wp := filepath.Join(home, ".config", "froog", "wallpaper.png")
	os.MkdirAll(filepath.Dir(wp), 0o700)
	if err := os.WriteFile(wp, solidPNG(t, 160, 90, color.RGBA{255, 0, 0, 255}), 0o600); err != nil {
		t.Fatal(err)
	}
	pixelIs(t, st.VNCPort, [3]byte{255, 0, 0}, 4*time.Second)
	os.WriteFile(wp, []byte("GIF89a, not a PNG"), 0o600)
	logf := filepath.Join(StateDir(home, ""), "desktop.log")
	wait.For(t, 4*time.Second, "the invalid wallpaper is logged", func() bool {
		b, _ := os.ReadFile(logf)
		return bytes.Contains(b, []byte("wallpaper ignored"))
	})
	pixelIs(t, st.VNCPort, [3]byte{255, 0, 0}, time.Second)
	os.Remove(wp)
	pixelIs(t, st.VNCPort, [3]byte{0x3b, 0x42, 0x52}, 4*time.Second) // DefaultBackground

	// stop ends every process and frees the port; again is fine.
	pids := GroupPids(st.PID)
	if len(pids) < 2 {
		t.Fatalf("group %d has %v, want the supervisor and Xvnc at least", st.PID, pids)
	}
	var comms []string
	for _, p := range pids {
		comms = append(comms, commOf(p))
	}
	t.Logf("processes: %v", comms)
	stopped := uptimeTicks(t)
	for range 2 {
		out, errs, code := cli(t, home, "stop")
		if code != 0 || parseState(t, out) != (State{Kind: KindDesktop}) {
			t.Fatalf("stop: exit %d, %q %s", code, out, errs)
		}
	}
	for _, p := range pids {
		if startTime(p) != 0 {
			t.Errorf("process %d (%s) outlived stop", p, commOf(p))
		}
	}
	// Other packages' tests start desktops too, from the same first
	// display: a server that took the port after stop is not ours.
	if err := probeRFB(st.VNCPort); err == nil {
		for _, p := range listeners(st.VNCPort) {
			if startTime(p) < stopped {
				t.Errorf("port %d is still held by process %d (%s), started before stop", st.VNCPort, p, commOf(p))
			} else {
				t.Logf("port %d was taken after stop by process %d (%s)", st.VNCPort, p, commOf(p))
			}
		}
	}
	if out, _, code := cli(t, home, "status"); code != ExitNotRunning || parseState(t, out) != (State{Kind: KindDesktop}) {
		t.Fatalf("status after stop: exit %d, %q; want %d and not running", code, out, ExitNotRunning)
	}
}

// uptimeTicks is the time since boot in the clock ticks of
// /proc/PID/stat's start time (USER_HZ, 100 on Linux).
func uptimeTicks(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	up, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(up * 100)
}

// listeners returns the processes listening on port.
func listeners(port int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if ok, _ := listensOn(pid, port); ok {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func listenTCP(host string, port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)))
}

// pixelIs waits until the screen's pixel at (100, 100) has colour want.
func pixelIs(t *testing.T, port int, want [3]byte, timeout time.Duration) {
	t.Helper()
	var got [3]byte
	var err error
	if !wait.Until(timeout, func() bool {
		got, err = screenPixel(port, 100, 100)
		return err == nil && got == want
	}) {
		t.Fatalf("pixel (100,100) is %v (%v), want %v", got, err, want)
	}
}

func TestBrowserView(t *testing.T) {
	testdep.Short(t, "drives Chromium")
	needXvnc(t)
	if !have("chromium") {
		testdep.Missing(t, "chromium is not installed (deploy/testdeps.sh installs it)")
	}
	home := t.TempDir()
	t.Cleanup(func() { cli(t, home, "stop", "--kind", "browser"); cli(t, home, "stop") })
	desk := start(t, home)
	br := start(t, home, "--kind", "browser")
	if br.Kind != KindBrowser || br.Display == desk.Display || br.VNCPort == desk.VNCPort || br.Profile != filepath.Join(home, ".config", "froog-browser") {
		t.Fatalf("browser %+v next to desktop %+v: want its own display, port and the default profile", br, desk)
	}
	if err := probeRFB(br.VNCPort); err != nil {
		t.Fatal(err)
	}
	chromium := func() int {
		for _, p := range GroupPids(br.PID) {
			if strings.HasPrefix(commOf(p), "chrom") {
				return p
			}
		}
		return 0
	}
	wait.For(t, 20*time.Second, "Chromium runs on the browser view", func() bool { return chromium() != 0 })
	// Its last window gone (the process ended), a new one comes.
	first := chromium()
	exec.Command("kill", strconv.Itoa(first)).Run()
	wait.For(t, 20*time.Second, "Chromium comes back", func() bool { p := chromium(); return p != 0 && p != first })

	// Another profile replaces the open one.
	other := filepath.Join(home, "work-profile")
	br2 := start(t, home, "--kind", "browser", "--profile", other)
	if br2.Profile != other || br2.PID == br.PID {
		t.Fatalf("got %+v, want a new supervisor with profile %s", br2, other)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the profile folder was not created: %v", err)
	}
	if _, _, code := cli(t, home, "start", "--kind", "browser", "--profile", "/etc/x"); code != ExitFailed {
		t.Errorf("a system profile: exit %d, want %d", code, ExitFailed)
	}
	// The browser's stop leaves the desktop alone.
	cli(t, home, "stop", "--kind", "browser")
	if len(GroupPids(br2.PID)) != 0 {
		t.Errorf("browser processes outlived stop: %v", GroupPids(br2.PID))
	}
	if out, _, code := cli(t, home, "status"); code != 0 || parseState(t, out) != desk {
		t.Errorf("desktop after the browser's stop: exit %d, %q", code, out)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, ExitUsage},
		{[]string{"frobnicate"}, ExitUsage},
		{[]string{"start", "--kind", "wall"}, ExitUsage},
		{[]string{"status", "extra"}, ExitUsage},
		{[]string{"status", "--profile", "/p"}, ExitUsage},
		{[]string{"status", "--browser"}, ExitUsage},
		{[]string{"start", "--kind", "browser", "--browser"}, ExitFailed}, // a browser window is for the desktop
		{[]string{"start", "--profile", "/tmp/p"}, ExitFailed},            // a profile is for the browser view
		{[]string{"help"}, ExitOK},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), tc.args, &out, &errb); code != tc.code {
			t.Errorf("%v: exit %d (%s), want %d", tc.args, code, errb.String(), tc.code)
		}
	}
}

// When the X server dies, its supervisor ends everything and clears its
// state; the next start makes a new screen.
func TestXServerDies(t *testing.T) {
	needXvnc(t)
	home := t.TempDir()
	t.Cleanup(func() { cli(t, home, "stop") })
	st := start(t, home)
	for _, p := range GroupPids(st.PID) {
		if commOf(p) == "Xvnc" || commOf(p) == "Xtigervnc" {
			exec.Command("kill", "-9", strconv.Itoa(p)).Run()
		}
	}
	wait.For(t, 10*time.Second, "the supervisor and its children end", func() bool { return len(GroupPids(st.PID)) == 0 })
	if _, _, code := cli(t, home, "status"); code != ExitNotRunning {
		t.Fatalf("status: exit %d, want %d", code, ExitNotRunning)
	}
	if st2 := start(t, home); st2.PID == st.PID || probeRFB(st2.VNCPort) != nil {
		t.Fatalf("start again: %+v after %+v, want a new screen that speaks RFB", st2, st)
	}
}

// Desktops started at once (a wall opened on many sandboxes of the local
// driver, which share /tmp) each get a display of their own: without the
// lock on choosing one, they all tried the same first displays and the
// last used up their launches against each other.
func TestConcurrentStarts(t *testing.T) {
	testdep.Short(t, "starts real desktops (Xvnc, XFCE): ~30 s")
	needXvnc(t)
	const n = 2 * maxLaunches
	homes := make([]string, n)
	states := make([]State, n)
	errs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		homes[i] = t.TempDir()
		t.Cleanup(func() { cli(t, homes[i], "stop") })
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errb, code := cli(t, homes[i], "start")
			if code != 0 {
				errs[i] = fmt.Sprintf("exit %d: %s", code, errb)
				return
			}
			json.Unmarshal([]byte(out), &states[i])
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, st := range states {
		if errs[i] != "" || !st.Running {
			t.Errorf("start %d: %s %+v", i, errs[i], st)
			continue
		}
		if seen[st.VNCPort] {
			t.Errorf("start %d: port %d given twice", i, st.VNCPort)
		}
		seen[st.VNCPort] = true
		// Ten desktops come up at once beside the rest of the suite: an
		// X server busy with its clients can take longer than one probe's
		// 2 s to greet. One that has died never will.
		var err error
		if !wait.Until(10*time.Second, func() bool { err = probeRFB(st.VNCPort); return err == nil }) {
			var procs []string
			for _, p := range GroupPids(st.PID) {
				procs = append(procs, commOf(p))
			}
			t.Errorf("start %d: port %d does not speak RFB: %v; its supervisor's group: %v", i, st.VNCPort, err, procs)
		}
	}
}
