package local_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/drivertest"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

type rig struct {
	t       *testing.T
	drv     *local.Driver
	control ssh.Signer
	sb      *store.Sandbox
}

func newRig(t *testing.T) *rig {
	control := testkit.NewKey(t)
	// A relative folder, as `make run` gives (./.froog): homes must still
	// be absolute.
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	drv, err := local.New(local.Options{Dir: rel, ControlKey: control.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return &rig{t: t, drv: drv, control: control, sb: &store.Sandbox{ID: store.NewID("sbx"), Name: "box"}}
}

func (r *rig) start() hostctl.Endpoint {
	r.t.Helper()
	ep, err := r.drv.Start(context.Background(), r.sb, nil)
	if err != nil {
		r.t.Fatalf("Start: %v", err)
	}
	return ep
}

func (r *rig) dial(ep hostctl.Endpoint, signer ssh.Signer) (*ssh.Client, error) {
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		r.t.Fatal(err)
	}
	return ssh.Dial("tcp", net.JoinHostPort(ep.Host, fmt.Sprint(ep.Port)), &ssh.ClientConfig{
		User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.FixedHostKey(key), Timeout: 5 * time.Second,
	})
}

func (r *rig) client(ep hostctl.Endpoint) *ssh.Client {
	r.t.Helper()
	c, err := r.dial(ep, r.control)
	if err != nil {
		r.t.Fatalf("dial: %v", err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

// run runs a command and returns stdout, stderr and the exit status.
func run(t *testing.T, c *ssh.Client, cmd string, env map[string]string, stdin string) (string, string, int) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range env {
		if err := s.Setenv(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr, s.Stdin = &out, &errb, strings.NewReader(stdin)
	err = s.Run(cmd)
	code := 0
	if ee, ok := err.(*ssh.ExitError); ok {
		code = ee.ExitStatus()
	} else if err != nil {
		t.Fatalf("run %q: %v", cmd, err)
	}
	return out.String(), errb.String(), code
}

func TestExec(t *testing.T) {
	r := newRig(t)
	c := r.client(r.start())
	out, errs, code := run(t, c, `echo "hi $NAME"; pwd; cat; echo oops >&2; exit 7`, map[string]string{"NAME": "you"}, "from stdin\n")
	home := r.drv.Home(r.sb)
	if out != "hi you\n"+home+"\nfrom stdin\n" || errs != "oops\n" || code != 7 {
		t.Fatalf("got %q, %q, %d", out, errs, code)
	}
	if out, _, code := run(t, c, `cd && pwd`, nil, ""); out != home+"\n" || code != 0 {
		t.Fatalf("cd to $HOME: %q, exit %d", out, code)
	}
	// A command killed by a signal reports 128+n, like a shell.
	if _, _, code := run(t, c, `kill -9 $$`, nil, ""); code != 137 {
		t.Fatalf("killed command: exit %d, want 137", code)
	}
}

func TestOnlyTheControlKey(t *testing.T) {
	r := newRig(t)
	ep := r.start()
	if _, err := r.dial(ep, testkit.NewKey(t)); err == nil {
		t.Fatal("a stranger's key was accepted")
	}
}

// Closing the channel kills the command's whole process group.
func TestClosingKillsProcessGroup(t *testing.T) {
	r := newRig(t)
	c := r.client(r.start())
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(`sleep 300 & echo $! > child.pid; sleep 300`); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(r.drv.Home(r.sb), "child.pid")
	var pid int
	wait.For(t, 10*time.Second, "the child's pid is written", func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && len(b) > 0 && sscan(string(b), &pid)
	})
	s.Close()
	wait.For(t, 10*time.Second, "the child dies with the channel", func() bool { return !alive(pid) })
}

// A command that has ended leaves its process group alone when its
// channel closes. A job the API starts is a background child that calls
// setsid: for a moment after the command has exited it is still in the
// command's group, and the session's close used to kill it there now and
// then (the exit and the close raced), so a job's server never came up.
// Here the child stays 50 ms in the group: before the fix about 1 in 10
// were killed.
func TestEndedCommandKeepsBackgroundJobs(t *testing.T) {
	r := newRig(t)
	ep := r.start()
	home := r.drv.Home(r.sb)
	const workers, each = 4, 15
	lost := make(chan int, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		c := r.client(ep)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("job-%d-%d.pid", w, i)
				s, err := c.NewSession()
				if err != nil {
					t.Error(err)
					return
				}
				err = s.Run(`{ exec < /dev/null > /dev/null 2>&1; sleep 0.05; exec setsid sleep 60; } & echo $! > ` + name)
				s.Close()
				if err != nil {
					t.Errorf("starting a job: %v", err)
					return
				}
				b, _ := os.ReadFile(filepath.Join(home, name))
				var pid int
				if !sscan(string(b), &pid) {
					t.Errorf("%s: %q", name, b)
					return
				}
				// Either it reaches a session of its own or it was killed.
				if !wait.Until(10*time.Second, func() bool { return !alive(pid) || sessionOf(pid) == pid }) {
					t.Errorf("job %d neither reached a session of its own nor died", pid)
					return
				}
				if !alive(pid) {
					lost <- pid
				}
			}
		}()
	}
	wg.Wait()
	if n := len(lost); n > 0 {
		t.Fatalf("%d of %d background jobs were killed with the session that started them", n, workers*each)
	}
}

// Signals reach the process group.
func TestSignal(t *testing.T) {
	r := newRig(t)
	c := r.client(r.start())
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(`trap 'echo got-term; exit 3' TERM; touch ready; while true; do sleep 0.05; done`); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the command is ready", func() bool { _, err := os.Stat(filepath.Join(r.drv.Home(r.sb), "ready")); return err == nil })
	if err := s.Signal(ssh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = s.Wait()
	if ee, ok := err.(*ssh.ExitError); !ok || ee.ExitStatus() != 3 {
		t.Fatalf("after TERM: %v, want exit 3", err)
	}
}

func TestDirectTCPIP(t *testing.T) {
	r := newRig(t)
	c := r.client(r.start())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "through") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	conn, err := c.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("dial loopback: %v", err)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(conn)
	conn.Close()
	if !bytes.HasSuffix(b, []byte("through")) {
		t.Fatalf("got %q", b)
	}
	for _, dest := range []string{"192.0.2.1:80", "10.0.0.1:22", "[2001:db8::1]:80", "example.com:80"} {
		if c, err := c.Dial("tcp", dest); err == nil {
			c.Close()
			t.Errorf("%s: a non-loopback destination was allowed", dest)
		} else if !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: got %v, want a refusal naming loopback", dest, err)
		}
	}
	// Nothing listening: a clear refusal.
	if _, err := c.Dial("tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "nothing listens") {
		t.Fatalf("closed port: %v", err)
	}
}

// Pause freezes every process and a start within the window resumes
// them; Stop kills them; files survive both.
func TestPauseResumeStop(t *testing.T) {
	r := newRig(t)
	c := r.client(r.start())
	// A job that left its process group, as background jobs do.
	run(t, c, `echo kept > file; setsid sh -c 'while true; do date +%s%N >> ticks; sleep 0.05; done' > /dev/null 2>&1 < /dev/null & echo $! > job.pid`, nil, "")
	home := r.drv.Home(r.sb)
	var pid int
	wait.For(t, 10*time.Second, "the job's pid is written", func() bool { b, _ := os.ReadFile(filepath.Join(home, "job.pid")); return sscan(string(b), &pid) })
	if err := r.drv.Pause(context.Background(), r.sb); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the job is frozen", func() bool { return frozen(pid) })
	n := lines(t, filepath.Join(home, "ticks"))
	time.Sleep(200 * time.Millisecond) // four ticks' time, in which none must come
	if m := lines(t, filepath.Join(home, "ticks")); m != n {
		t.Fatalf("a paused job kept running: %d ticks, then %d", n, m)
	}
	c2 := r.client(r.start()) // warm resume
	wait.For(t, 10*time.Second, "the job ticks again", func() bool { return lines(t, filepath.Join(home, "ticks")) > n })
	if out, _, _ := run(t, c2, "cat file", nil, ""); out != "kept\n" {
		t.Fatalf("file after resume: %q", out)
	}
	if err := r.drv.Stop(context.Background(), r.sb); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatal("the job survived Stop")
	}
	c3 := r.client(r.start()) // cold start
	if out, _, _ := run(t, c3, "cat file", nil, ""); out != "kept\n" {
		t.Fatalf("file after a cold start: %q", out)
	}
	if err := r.drv.Delete(context.Background(), r.sb); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Fatalf("home after Delete: %v", err)
	}
}

// The host key is the sandbox's own and survives a restart of the driver.
func TestHostKeyStays(t *testing.T) {
	r := newRig(t)
	first := r.start()
	other := &store.Sandbox{ID: store.NewID("sbx")}
	ep2, err := r.drv.Start(context.Background(), other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ep2.HostKey == first.HostKey {
		t.Fatal("two sandboxes share a host key")
	}
	r.drv.Stop(context.Background(), r.sb)
	if again := r.start(); again.HostKey != first.HostKey {
		t.Fatal("the host key changed across a restart")
	}
}

func sscan(s string, pid *int) bool {
	_, err := fmt.Sscan(s, pid)
	return err == nil && *pid > 0
}

func alive(pid int) bool {
	st := procState(pid)
	return st != "" && st != "Z"
}

// procState is the state letter of /proc/PID/stat ("" when gone).
func procState(pid int) string {
	if f := testkit.ProcStat(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// frozen reports whether pid is stopped (T), or waits (D) in vfork for a
// child that is: sh starts commands with vfork, and a SIGSTOP that lands
// on the child before its exec leaves the parent in D until SIGCONT.
func frozen(pid int) bool {
	switch procState(pid) {
	case "T":
		return true
	case "D":
		for _, child := range testkit.Children(pid) {
			if procState(child) == "T" {
				return true
			}
		}
	}
	return false
}

// sessionOf is the session id of /proc/PID/stat (0 when gone).
func sessionOf(pid int) int {
	f := testkit.ProcStat(pid)
	if len(f) < 4 {
		return 0
	}
	sid, _ := strconv.Atoi(f[3])
	return sid
}

func lines(t *testing.T, path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// The driver suite. A local sandbox lives in the driver's process, so a
// restarted controller finds the same driver (as in froogd dev); nothing
// of it can crash on its own.
func TestDriverSuite(t *testing.T) {
	signer := testkit.NewKey(t)
	drivers := map[string]*local.Driver{}
	drivertest.Run(t, drivertest.Driver{
		Signer: signer,
		Boot:   15 * time.Second,
		Alive: func(_ string, sb store.Sandbox) bool {
			// A process of the sandbox's carries its id in its environment.
			envs, _ := filepath.Glob("/proc/[0-9]*/environ")
			for _, f := range envs {
				if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("FROOG_SANDBOX_ID="+sb.ID+"\x00")) {
					return true
				}
			}
			return false
		},
		Files: func(dir string, sb store.Sandbox) string { return filepath.Join(dir, sb.ID) },
		Open: func(t *testing.T, dir string, log *slog.Logger) hostctl.Driver {
			if d := drivers[dir]; d != nil {
				return d
			}
			d, err := local.New(local.Options{Dir: dir, ControlKey: signer.PublicKey(), Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			drivers[dir] = d
			return d
		},
	})
}
