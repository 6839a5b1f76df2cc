package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultBackground is the desktop's plain background, shown when there
// is no wallpaper.
const DefaultBackground = "#3b4252"

// maxLaunches bounds the X servers one supervisor tries (each on the next
// free display) before it gives up.
const maxLaunches = 5

// supervisor runs one screen: the X and VNC server, what runs on it, and
// the wallpaper.
type supervisor struct {
	o   Options
	log *slog.Logger
	env []string // the children's: DISPLAY set
	n   int      // the X display's number
	wg  sync.WaitGroup
}

// runDaemon is the supervisor's life: it starts the screen, writes the
// state file and one line of JSON to ready (then closes it), and runs
// until ctx ends or the X server dies, then ends everything it started.
func runDaemon(ctx context.Context, o Options, ready *os.File, log *slog.Logger) error {
	if ready != nil {
		defer ready.Close()
	}
	if err := o.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return fmt.Errorf("create desktop state folder: %w", err)
	}
	s := &supervisor{o: o, log: log}
	x, xdone, n, err := s.startX(ctx)
	if err != nil {
		return err
	}
	s.n = n
	defer func() {
		terminate(x.Process, xdone)
		removeRecord(o.StateDir, o.Kind, os.Getpid())
	}()

	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	s.env = append(withoutVar(env, "DISPLAY"), "DISPLAY=:"+strconv.Itoa(n))
	st := State{Kind: o.Kind, Running: true, Display: ":" + strconv.Itoa(n), VNCPort: VNCBase + n, PID: os.Getpid()}
	ctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); s.wg.Wait() }()
	// Sound first: what the screen runs plays to it (PULSE_SERVER).
	if st.AudioPort = s.sound(ctx, n); st.AudioPort != 0 {
		st.PulseServer = PulseServer(n)
	}
	var wp *wallpaper
	if o.Kind == KindDesktop {
		// The first background before anyone hears of the screen, so
		// that nothing drawn on it later is painted over.
		wp = &wallpaper{path: filepath.Join(o.Home, ".config", "froog", "wallpaper.png"), copy: filepath.Join(o.StateDir, "wallpaper.png"), env: s.env, log: log}
		wp.check(ctx)
	} else {
		st.Profile = o.Profile
		if err := os.MkdirAll(o.Profile, 0o700); err != nil {
			return fmt.Errorf("create browser profile: %w", err)
		}
	}
	if err := writeRecord(o.StateDir, record{State: st, PIDStart: startTime(os.Getpid())}); err != nil {
		return err
	}
	if ready != nil {
		b, _ := json.Marshal(st)
		ready.Write(append(b, '\n'))
		ready.Close()
	}
	log.Info("screen ready", "kind", o.Kind, "display", st.Display, "vnc_port", st.VNCPort)

	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.selkies(ctx.Done(), n) }()
	switch o.Kind {
	case KindDesktop:
		s.desktop(ctx)
		if o.Browser {
			s.desktopBrowser(ctx)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					wp.check(ctx)
				}
			}
		}()
	case KindBrowser:
		s.browser(ctx)
	}
	select {
	case <-ctx.Done():
		log.Info("stopping", "kind", o.Kind)
		return nil
	case <-xdone:
		return fmt.Errorf("the X server of %s ended: %v", st.Display, x.ProcessState)
	}
}

// xLockDir is where X servers write their lock files (.X10-lock).
const xLockDir = "/tmp"

// lockDisplays takes the machine-wide lock on choosing a display, in dir;
// unlock releases it. The local driver runs a supervisor a sandbox, all
// sharing /tmp: without the lock, desktops started at once (a wall opened
// on 20 sandboxes) all tried the same first displays, and the last ones
// used up their launches against each other and failed. Without the lock
// file (a read-only /tmp) starts race as before.
func lockDisplays(dir string) (unlock func()) {
	f, err := os.OpenFile(filepath.Join(dir, ".froog-desktop-displays.lock"), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing it releases the lock
}

// startX starts Xvnc on the first free display that it can have; xdone
// closes when it ends.
func (s *supervisor) startX(ctx context.Context) (x *exec.Cmd, xdone chan struct{}, n int, err error) {
	bin, err := lookPath("Xvnc", "Xtigervnc")
	if err != nil {
		return nil, nil, 0, err
	}
	launches := 0
	for n = FirstDisplay; n <= LastDisplay && launches < maxLaunches; n++ {
		unlock := lockDisplays(xLockDir)
		if !displayFree(xLockDir, n, VNCBase+n) {
			unlock()
			continue
		}
		launches++
		args := []string{":" + strconv.Itoa(n),
			"-geometry", fmt.Sprintf("%dx%d", Width, Height), "-depth", "24",
			"-rfbport", strconv.Itoa(VNCBase + n), "-interface", "127.0.0.1",
			"-SecurityTypes", "None", "-AlwaysShared", "-DisconnectClients=0",
			// No blacklist: every client is the edge (or the sandbox's
			// own code) from 127.0.0.1, and more than 5 connecting at
			// once (viewers and a wall's tile after an edge restart)
			// would lock them all out for 10 s and more.
			"-UseBlacklist=0",
			"-nolisten", "tcp", "-desktop", "froog-" + string(s.o.Kind),
			"-Log", "*:stderr:10"} // errors and connections, not every update's statistics
		if s.o.Kind == KindBrowser {
			// The browser view has no clipboard.
			args = append(args, "-AcceptCutText=0", "-SendCutText=0", "-SetPrimary=0", "-SendPrimary=0")
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			unlock()
			return nil, nil, 0, fmt.Errorf("start %s: %w", bin, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		// The display is taken for the next to look once its lock file
		// is there.
		waitUntil(5*time.Second, func() bool {
			select {
			case <-exited:
				return true
			default:
				return !displayFree(xLockDir, n, VNCBase+n)
			}
		})
		unlock()
		if s.ready(ctx, n, cmd.Process.Pid, exited) {
			return cmd, exited, n, nil
		}
		terminate(cmd.Process, exited)
		if ctx.Err() != nil {
			return nil, nil, 0, ctx.Err()
		}
		s.log.Warn("X server did not come up; trying the next display", "display", n)
	}
	return nil, nil, 0, fmt.Errorf("no display for %s: %d X servers tried from :%d", s.o.Kind, launches, FirstDisplay)
}

// ready waits until display n's VNC port speaks RFB from the socket of
// process pid (the Xvnc just started), and says whether it does before
// that server exits, ctx ends or half of startTimeout passes. An RFB
// server on the port that is not pid's is another's (a supervisor that
// won the race for the display): this one must not take it for its own,
// or its sandbox's tiles and viewers would show another's screen.
func (s *supervisor) ready(ctx context.Context, n, pid int, exited <-chan struct{}) bool {
	deadline := time.NewTimer(startTimeout / 2)
	defer deadline.Stop()
	for {
		if probeRFB(VNCBase+n) == nil {
			mine, err := listensOn(pid, VNCBase+n)
			if !mine {
				s.log.Warn("another server has the display's VNC port", "display", n, "port", VNCBase+n, "err", fmt.Sprint(err))
				return false
			}
			select {
			case <-exited:
				return false
			default:
				return true
			}
		}
		select {
		case <-exited:
			return false
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// desktop starts the window manager: XFCE's (xfwm4 and its panel) where
// it is installed, as in the OS image; else openbox; else none.
func (s *supervisor) desktop(ctx context.Context) {
	switch {
	case have("xfwm4") && have("xfce4-panel"):
		if have("dbus-daemon") {
			// XFCE's settings travel over a session bus of its own. Its
			// socket is named by the display (which this supervisor's X
			// server holds) in the temporary folder: a unix socket's
			// path has at most 107 bytes, and a home can be deeper than
			// that (the local driver's sandboxes: dbus-daemon failed with
			// "Socket name too long", and XFCE with it).
			bus := busPath(s.n)
			os.Remove(bus)
			s.env = append(withoutVar(s.env, "DBUS_SESSION_BUS_ADDRESS"), "DBUS_SESSION_BUS_ADDRESS=unix:path="+bus)
			s.keep(ctx, "dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=unix:path="+bus)
			waitUntil(5*time.Second, func() bool { _, err := os.Stat(bus); return err == nil })
		}
		if have("xfsettingsd") {
			s.keep(ctx, "xfsettingsd", "--no-daemon", "--disable-wm-check")
		}
		// No xfdesktop: the root window is the background, which the
		// wallpaper owns.
		s.keep(ctx, "xfwm4", "--compositor=off")
		// The panel's default layout, without asking on the first start.
		s.env = append(s.env, "XFCE_PANEL_MIGRATE_DEFAULT=1")
		s.keep(ctx, "xfce4-panel")
		s.log.Info("window manager", "wm", "xfce")
	case have("openbox"):
		s.keep(ctx, "openbox")
		s.log.Info("window manager", "wm", "openbox")
	default:
		s.log.Info("window manager", "wm", "none")
	}
}

// busPath is the socket of display n's session bus.
func busPath(n int) string {
	return filepath.Join(xLockDir, fmt.Sprintf(".froog-desktop-bus-%d", n))
}

// browser keeps Chromium alone on the screen: filling it, no window
// manager, started again when its last window closes.
func (s *supervisor) browser(ctx context.Context) {
	bin, err := lookPath("chromium", "chromium-browser", "google-chrome")
	if err != nil {
		s.log.Error("no browser for the browser view", "err", err)
		return
	}
	args := []string{"--user-data-dir=" + s.o.Profile, "--no-first-run", "--no-default-browser-check",
		"--disable-session-crashed-bubble", "--noerrdialogs", "--password-store=basic",
		"--disable-dev-shm-usage", "--window-position=0,0", fmt.Sprintf("--window-size=%d,%d", Width, Height),
		"--start-maximized", "--disable-features=Translate"}
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses root (the local driver on a host run
		// as root, tests); the view is no boundary against the sandbox's
		// own code anyway (see the docs).
		args = append(args, "--no-sandbox", "--test-type")
	}
	s.keep(ctx, bin, args...)
}

// desktopBrowser opens one browser window on the desktop, beside the
// panel: Chromium with its own default profile (not the browser view's),
// not started again when a person closes it.
func (s *supervisor) desktopBrowser(ctx context.Context) {
	bin, err := lookPath("chromium", "chromium-browser", "google-chrome")
	if err != nil {
		s.log.Info("no browser for the desktop", "err", err)
		return
	}
	args := []string{"--no-first-run", "--no-default-browser-check", "--disable-session-crashed-bubble", "--noerrdialogs",
		"--password-store=basic", "--disable-dev-shm-usage", "--window-position=160,90", "--window-size=1280,800",
		"--disable-features=Translate"}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox", "--test-type") // as the browser view (browser)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		cmd := exec.Command(bin, append(args, "about:blank")...)
		cmd.Env, cmd.Dir = s.env, s.o.Home
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			s.log.Error("start", "program", bin, "err", err)
			return
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-ctx.Done():
			terminate(cmd.Process, done)
		case <-done:
			s.log.Info("the desktop's browser ended", "state", cmd.ProcessState.String())
		}
	}()
}

// keep runs a program until ctx ends, starting it again when it exits
// (backing off while it keeps failing at once).
func (s *supervisor) keep(ctx context.Context, name string, args ...string) {
	s.keepEnv(ctx, s.env, name, args...)
}

// keepEnv is keep with env as the program's environment.
func (s *supervisor) keepEnv(ctx context.Context, env []string, name string, args ...string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		backoff := 500 * time.Millisecond
		for {
			cmd := exec.Command(name, args...)
			cmd.Env, cmd.Dir = env, s.o.Home
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			began := time.Now()
			if err := cmd.Start(); err != nil {
				s.log.Error("start", "program", name, "err", err)
				return
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-ctx.Done():
				terminate(cmd.Process, done)
				return
			case <-done:
			}
			if time.Since(began) > 10*time.Second {
				backoff = 500 * time.Millisecond
			} else {
				backoff = min(2*backoff, 10*time.Second)
			}
			s.log.Info("program ended; starting it again", "program", name, "state", cmd.ProcessState.String(), "after", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}()
}

// terminate sends SIGTERM, and SIGKILL if the process has not ended
// within 3 s.
func terminate(p *os.Process, done <-chan struct{}) {
	p.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		p.Kill()
		<-done
	}
}

func have(name string) bool { _, err := exec.LookPath(name); return err == nil }

func lookPath(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %s is installed", strings.Join(names, ", "))
}

func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
