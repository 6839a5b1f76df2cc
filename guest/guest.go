package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options say which screen and where its state is. The CLI fills them
// from flags and the environment.
type Options struct {
	Kind Kind
	// Home is the user's home: the wallpaper and the browser's default
	// profile are under it. Required.
	Home string
	// StateDir holds the state files and logs. Required (see StateDir).
	StateDir string
	// Profile is the browser view's Chromium user data directory; empty
	// means ~/.config/froog-browser. Asking for another profile than the
	// running one's restarts the view.
	Profile string
	// Browser, for a desktop, opens a browser window on it when it
	// starts (where Chromium is installed), as the docs' desktop has.
	Browser bool
	// Exe is the program run as the supervisor, with argv[0]
	// froog-desktop; empty means os.Executable().
	Exe string
	// Env is the supervisor's environment; nil means os.Environ().
	Env []string
	// SelkiesToken, for start, is the master token for Selkies (the
	// edge's, read from stdin): kept in a 0600 file, and Selkies runs
	// with it where it is installed. Empty: whatever token is kept.
	SelkiesToken string
}

// Exit codes of the CLI.
const (
	ExitOK         = 0
	ExitFailed     = 1
	ExitUsage      = 2
	ExitNotRunning = 3 // status only
)

// Name is the program's name: froogd run as froog-desktop is this
// program.
const Name = "froog-desktop"

// Screen size of every display.
const (
	Width  = 1920
	Height = 1080
)

// Displays are searched from FirstDisplay on, and a display's VNC port is
// VNCBase plus its number (:10 is 5910).
const (
	FirstDisplay = 10
	LastDisplay  = 99
	VNCBase      = 5900
)

// startTimeout bounds how long start waits for the port to speak RFB.
const startTimeout = 60 * time.Second

func (o *Options) check() error {
	var errs []error
	if _, err := ParseKind(string(o.Kind)); err != nil {
		errs = append(errs, err)
	}
	if o.Home == "" || !filepath.IsAbs(o.Home) {
		errs = append(errs, fmt.Errorf("home %q: want an absolute path", o.Home))
	}
	if o.StateDir == "" {
		errs = append(errs, errors.New("a state folder is required"))
	}
	if o.Kind == KindBrowser {
		if o.Profile == "" {
			o.Profile = filepath.Join(o.Home, ".config", "froog-browser")
		}
		if err := ValidProfile(o.Profile); err != nil {
			errs = append(errs, err)
		}
	} else if o.Profile != "" {
		errs = append(errs, errors.New("--profile is for the browser view"))
	}
	if o.Browser && o.Kind != KindDesktop {
		errs = append(errs, errors.New("--browser is for the desktop"))
	}
	return errors.Join(errs...)
}

// systemDirs may not hold a browser profile, nor anything under them.
var systemDirs = []string{"/etc", "/usr", "/proc", "/sys", "/dev", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/var/lib", "/var/log", "/var/run", "/run", "/srv", "/opt", "/root", "/snap"}

// MaxProfile is the longest profile path: a browser link's session
// cookie carries it to the edge, which starts the view with it.
const MaxProfile = 255

// ValidProfile says whether dir may be a Chromium user data directory: an
// absolute, clean path (no "..", no "//") of at most MaxProfile bytes,
// outside the system's folders. The API checks a browser link's profile
// with it too.
func ValidProfile(dir string) error {
	if len(dir) > MaxProfile {
		return fmt.Errorf("profile of %d bytes: at most %d", len(dir), MaxProfile)
	}
	if !filepath.IsAbs(dir) || strings.Contains(dir, "..") || strings.ContainsAny(dir, "\x00\n\r") {
		return fmt.Errorf("profile %q: want an absolute path with no \"..\" in it", dir)
	}
	c := filepath.Clean(dir)
	if c != strings.TrimSuffix(dir, "/") && dir != "/" {
		return fmt.Errorf("profile %q: want a clean path (%s)", dir, c)
	}
	if c == "/" || c == "/home" || c == "/tmp" || c == "/var" {
		return fmt.Errorf("profile %q: not a folder of the system's own", dir)
	}
	for _, s := range systemDirs {
		if c == s || strings.HasPrefix(c, s+"/") {
			return fmt.Errorf("profile %q: inside the system folder %s", dir, s)
		}
	}
	return nil
}

// Start starts the kind's screen unless it runs, and returns its state
// once its VNC port speaks RFB. Concurrent starts of one kind wait for
// each other and get the same screen.
func Start(ctx context.Context, o Options) (State, error) {
	unlock, err := o.lock()
	if err != nil {
		return State{}, err
	}
	defer unlock()
	if o.SelkiesToken != "" {
		if err := ValidSelkiesToken(o.SelkiesToken); err != nil {
			return State{}, err
		}
		if err := writeToken(o.StateDir, o.Kind, o.SelkiesToken); err != nil {
			return State{}, err
		}
	}
	if r, ok, err := readRecord(o.StateDir, o.Kind); err != nil {
		return State{}, err
	} else if ok && r.alive() {
		if (o.Kind != KindBrowser || r.Profile == o.Profile) && answers(r.VNCPort) {
			return awaitSelkies(o.StateDir, r.State, o.SelkiesToken), nil
		}
		// Another profile, or a supervisor whose server is gone: anew.
		if err := stop(o.StateDir, r); err != nil {
			return State{}, err
		}
	}
	st, err := spawn(ctx, o)
	if err != nil {
		return State{}, err
	}
	return awaitSelkies(o.StateDir, st, o.SelkiesToken), nil
}

// Status reports the kind's screen; Running is false unless its
// supervisor lives and its port speaks RFB.
func Status(o Options) (State, error) {
	if err := o.check(); err != nil {
		return State{}, err
	}
	r, ok, err := readRecord(o.StateDir, o.Kind)
	if err != nil || !ok || !r.alive() || !answers(r.VNCPort) {
		return State{Kind: o.Kind}, err
	}
	return withTransport(o.StateDir, r.State), nil
}

// Stop ends everything the kind's supervisor started. Stopping what does
// not run is no error.
func Stop(o Options) (State, error) {
	unlock, err := o.lock()
	if err != nil {
		return State{}, err
	}
	defer unlock()
	r, ok, err := readRecord(o.StateDir, o.Kind)
	if err != nil || !ok {
		return State{Kind: o.Kind}, err
	}
	return State{Kind: o.Kind}, stop(o.StateDir, r)
}

// stop asks the supervisor to end (SIGTERM: it ends its children), then
// kills what is left of its process group and waits until it is empty.
// A supervisor that is no longer alive is not signalled: its pid may be
// someone else's by now.
func stop(dir string, r record) error {
	if r.alive() {
		syscall.Kill(r.PID, syscall.SIGTERM)
		waitUntil(10*time.Second, func() bool { return !r.alive() })
		// A group outlives its leader while members are left, and its id
		// is not given to a new process meanwhile.
		syscall.Kill(-r.PID, syscall.SIGKILL)
		if !waitUntil(5*time.Second, func() bool { return groupGone(r.PID) }) {
			return fmt.Errorf("stop %s: processes of group %d do not end", r.Kind, r.PID)
		}
	}
	os.Remove(statePath(dir, r.Kind))
	return nil
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// lock checks the options and serialises start and stop of one kind for
// one user.
func (o *Options) lock() (func(), error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	dir, k := o.StateDir, o.Kind
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create desktop state folder: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, string(k)+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock desktop state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock desktop state: %w", err)
	}
	return func() { f.Close() }, nil
}

// spawn starts the supervisor in a session of its own, its output to the
// kind's log, and waits for the line it writes on fd 3 once the port
// speaks RFB (or for its end).
func spawn(ctx context.Context, o Options) (State, error) {
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return State{}, fmt.Errorf("start %s: %w", o.Kind, err)
		}
	}
	logPath := filepath.Join(o.StateDir, string(o.Kind)+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return State{}, fmt.Errorf("start %s: %w", o.Kind, err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return State{}, fmt.Errorf("start %s: %w", o.Kind, err)
	}
	defer pr.Close()
	args := []string{Name, "daemon", "--ready-fd", "3", "--kind", string(o.Kind)}
	if o.Kind == KindBrowser {
		args = append(args, "--profile", o.Profile)
	}
	if o.Browser {
		args = append(args, "--browser")
	}
	cmd := &exec.Cmd{Path: exe, Args: args, Dir: o.Home, Env: o.Env, Stdout: logf, Stderr: logf, ExtraFiles: []*os.File{pw}}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return State{}, fmt.Errorf("start %s: %w", o.Kind, err)
	}
	pw.Close()
	go cmd.Wait() // reaped when it ends, if this process outlives it

	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(pr).ReadString('\n')
		done <- result{line, err}
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		res.err = ctx.Err()
	case <-timer.C:
		res.err = fmt.Errorf("no VNC port after %v", startTimeout)
	}
	var st State
	if res.err == nil {
		res.err = json.Unmarshal([]byte(res.line), &st)
	}
	if res.err != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return State{}, fmt.Errorf("start %s: %v; %s", o.Kind, res.err, tail(logPath))
	}
	return st, nil
}

// tail is the end of a log, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > 800 {
		s = "…" + s[len(s)-800:]
	}
	if s == "" {
		return "its log is empty"
	}
	return "its log (" + path + "):\n" + s
}

// answers says whether a live supervisor's port speaks RFB, giving a
// busy server a few seconds: a screen is not torn down for being slow.
func answers(port int) bool {
	return waitUntil(5*time.Second, func() bool { return probeRFB(port) == nil })
}

var rfbVersion = regexp.MustCompile(`^RFB \d{3}\.\d{3}\n$`)

// probeRFB connects to the port on 127.0.0.1 and reads the server's
// ProtocolVersion.
func probeRFB(port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("no port")
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 12)
	if _, err := io.ReadFull(c, b); err != nil {
		return fmt.Errorf("port %d: %w", port, err)
	}
	if !rfbVersion.Match(b) {
		return fmt.Errorf("port %d speaks %q, not RFB", port, b)
	}
	return nil
}

// displayFree says whether display n looks free: no live X server holds
// its lock in lockDir (/tmp), and port can be had on 127.0.0.1. Two
// supervisors may still race for it; the loser's Xvnc fails and it tries
// the next one.
func displayFree(lockDir string, n, port int) bool {
	if b, err := os.ReadFile(filepath.Join(lockDir, fmt.Sprintf(".X%d-lock", n))); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return false
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
