package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/guest"
	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/sshkey"
	"froog.tech/froog/store"
)

// Options configure the driver.
type Options struct {
	// Dir holds one folder per sandbox. Required.
	Dir string
	// ControlKey is the only key the sandboxes' SSH servers accept. Required.
	ControlKey ssh.PublicKey
	// Addr is the IP address the sandboxes' SSH servers listen on, and
	// report: one other machines reach when the control plane is spread
	// over several (the host's advertised address). Empty means
	// 127.0.0.1, reachable from this machine only.
	Addr string
	// Logger; nil discards.
	Logger *slog.Logger
	// DesktopExe is the froogd binary that sandboxes run as froog-desktop
	// (their commands find it on PATH); empty means this process's own
	// executable, which is froogd except in tests.
	DesktopExe string
}

// Driver is the local driver.
type Driver struct {
	o      Options
	mu     sync.Mutex
	boxes  map[string]*box
	binDir string // on the sandboxes' PATH, once made
}

type box struct {
	sshd   *sshd
	ep     hostctl.Endpoint
	paused bool
}

var (
	_ hostctl.Driver = (*Driver)(nil)
	_ hostctl.Pauser = (*Driver)(nil)
)

// New checks the options; it starts nothing.
func New(o Options) (*Driver, error) {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("local driver: a folder is required"))
	}
	if o.ControlKey == nil {
		errs = append(errs, errors.New("local driver: the control plane's public key is required"))
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1"
	}
	if ip := net.ParseIP(o.Addr); ip == nil || ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("local driver: address %q: want one IP address of this host", o.Addr))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Commands find their home through $HOME, which must not depend on
	// the directory they run in.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("local driver: %w", err)
	}
	o.Dir = dir
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{o: o, boxes: map[string]*box{}}, nil
}

func (d *Driver) dir(sb *store.Sandbox) string { return filepath.Join(d.o.Dir, sb.ID) }

// Home is the folder that is the sandbox's home (~).
func (d *Driver) Home(sb *store.Sandbox) string { return filepath.Join(d.dir(sb), "home") }

// Start starts the sandbox's SSH server. The account's keys are not
// admitted: commands here run as the user that runs froogd, so only the
// control plane gets in (see the package doc).
func (d *Driver) Start(ctx context.Context, sb *store.Sandbox, _ []string) (hostctl.Endpoint, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.boxes[sb.ID]
	if b != nil && !b.paused {
		return b.ep, nil
	}
	home := d.Home(sb)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return hostctl.Endpoint{}, fmt.Errorf("create sandbox folder: %w", err)
	}
	key, err := hostKey(filepath.Join(d.dir(sb), "ssh_host_ed25519_key"))
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	if b != nil {
		signalAll(sb.ID, syscall.SIGCONT) // warm resume: everything carries on
	} else {
		killAll(sb.ID) // a cold start: nothing is left of an earlier run
	}
	s := newSSHD(sb.ID, home, d.bin(), key, d.o.ControlKey, d.o.Logger)
	addr, err := s.listen(d.o.Addr)
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	ep := hostctl.Endpoint{Host: addr.IP.String(), Port: addr.Port, HostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey())))}
	d.boxes[sb.ID] = &box{sshd: s, ep: ep}
	return ep, nil
}

// Fork copies src's home folder to dst, which has none yet. A running
// source is copied as it is (this driver is for development).
func (d *Driver) Fork(ctx context.Context, src, dst *store.Sandbox) error {
	if _, err := os.Stat(d.Home(dst)); err == nil {
		return nil
	}
	if err := os.MkdirAll(d.dir(dst), 0o700); err != nil {
		return err
	}
	tmp := d.Home(dst) + ".new"
	if out, err := exec.CommandContext(ctx, "cp", "-a", d.Home(src), tmp).CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("fork: copying the home folder: %v: %s", err, out)
	}
	return os.Rename(tmp, d.Home(dst))
}

func (d *Driver) Pause(ctx context.Context, sb *store.Sandbox) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.boxes[sb.ID]
	if b == nil {
		return nil
	}
	if !b.paused {
		b.sshd.close()
		signalAll(sb.ID, syscall.SIGSTOP)
		b.paused = true
	}
	return nil
}

func (d *Driver) Stop(ctx context.Context, sb *store.Sandbox) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked(sb.ID)
	return nil
}

func (d *Driver) stopLocked(id string) {
	if b := d.boxes[id]; b != nil {
		b.sshd.close()
		delete(d.boxes, id)
	}
	killDesktops(id, filepath.Join(d.o.Dir, id, "home"))
	killAll(id)
}

// bin makes the folder that sandboxes have first on their PATH, with
// froog-desktop in it (a symlink to froogd, which acts on its name), and
// returns it; "" when there is none (the sandboxes then have no desktop).
// Called with d.mu held.
func (d *Driver) bin() string {
	if d.binDir != "" {
		return d.binDir
	}
	exe := d.o.DesktopExe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			d.o.Logger.Warn("local driver: sandboxes get no froog-desktop", "err", err)
			return ""
		}
	}
	// A name no sandbox id takes.
	dir := filepath.Join(d.o.Dir, ".bin")
	link := filepath.Join(dir, guest.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.o.Logger.Warn("local driver: sandboxes get no froog-desktop", "err", err)
		return ""
	}
	if cur, err := os.Readlink(link); err != nil || cur != exe {
		os.Remove(link)
		if err := os.Symlink(exe, link); err != nil {
			d.o.Logger.Warn("local driver: sandboxes get no froog-desktop", "err", err)
			return ""
		}
	}
	d.binDir = dir
	return dir
}

// killDesktops kills the process groups of the sandbox's froog-desktop
// supervisors (their Xvnc, window manager, Chromium), found in its state
// files, before killAll sweeps what carries the sandbox's tag: so that
// nothing of a desktop is left that dropped the tag from its environment.
// A group is killed only if its leader is the sandbox's: the state files
// are in the sandbox's home, which its commands can write.
func killDesktops(id, home string) {
	guest.KillGroups(guest.StateDir(home, ""), func(pgid int) bool { return tagged(pgid, id) })
}

func (d *Driver) Delete(ctx context.Context, sb *store.Sandbox) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked(sb.ID)
	if err := os.RemoveAll(d.dir(sb)); err != nil {
		return fmt.Errorf("remove sandbox folder: %w", err)
	}
	return nil
}

// Close ends every sandbox's SSH server and processes; their files stay.
// hostctl starts them again when it comes back.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.boxes {
		d.stopLocked(id)
	}
	return nil
}

// hostKey loads the sandbox's host key, creating it the first time.
func hostKey(path string) (ssh.Signer, error) {
	s, _, err := sshkey.LoadOrCreate(path, "")
	return s, err
}

// pidsOf lists the processes tagged with the sandbox's id.
func pidsOf(id string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if tagged(pid, id) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// tagged says whether process pid carries the sandbox's tag. A process in
// the middle of an execve shows an empty environment for a moment (and a
// read that spanned the exec would end short: readEnviron reads once): so
// "untagged" is believed only from two reads that agree, within
// execWait — else a supervisor that execs as its sandbox stops keeps its
// process group, and whatever in it dropped the tag, alive. Kernel
// threads and zombies have no environment: not read again.
func tagged(pid int, id string) bool {
	want := []byte(tagVar + "=" + id + "\x00")
	path := "/proc/" + strconv.Itoa(pid) + "/environ"
	var deadline time.Time // execWait from the first read's end
	var last []byte
	for {
		env, err := readEnviron(path)
		if deadline.IsZero() {
			deadline = time.Now().Add(execWait)
		}
		if err != nil {
			return false
		}
		if bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...)) {
			return true
		}
		if len(env) > 0 && bytes.Equal(env, last) {
			return false
		}
		if !userProcess(pid) || time.Now().After(deadline) {
			return false
		}
		last = env
		if len(env) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// readEnviron reads a process's environment in one read: the file is the
// memory of the process as it was when opened, and once the process execs
// that memory is gone, so a second read ends early. os.ReadFile's first
// read is 512 bytes: a process that kept exec'ing showed its environment
// cut at 512 bytes twice in a row, tag missing, under the suite's load.
func readEnviron(path string) ([]byte, error) {
	for size := 16 << 10; ; size *= 2 {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		b := make([]byte, size)
		n, err := f.Read(b) // one read(2)
		f.Close()
		if err == io.EOF {
			n, err = 0, nil
		}
		if err != nil || n < size || size >= maxEnviron {
			return b[:n], err
		}
	}
}

// maxEnviron bounds readEnviron: Linux caps a process's arguments and
// environment at a quarter of its stack limit, 2 MiB by default.
const maxEnviron = 8 << 20

// execWait bounds how long tagged reads again an empty environment, from
// the end of its first read: an exec on a loaded machine (TCG guests, a
// parallel test phase) took over 50 ms of wall time, and a read that met
// an exec waited for it (the exec's lock) 1.3 s once, then came back
// empty, the new image's environment not yet set. Only a process in an
// exec, or one started with an empty environment (none on a usual host),
// costs it.
const execWait = time.Second

// pfKthread is the kernel-thread bit of /proc/PID/stat's flags (field 9).
const pfKthread = 0x00200000

// userProcess says whether pid is a live process (not a zombie) of user
// space (not a kernel thread): one whose environment is there to read.
func userProcess(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:]) // state (field 3), ppid, pgrp, session, tty, tpgid, flags (9)
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread == 0
}

// signalAll sends sig to every process of the sandbox, a few rounds so that
// children forked meanwhile are caught too.
func signalAll(id string, sig syscall.Signal) {
	for range 3 {
		for _, pid := range pidsOf(id) {
			syscall.Kill(pid, sig)
		}
	}
}

// killAll kills every process of the sandbox and waits (bounded) until
// none is left.
func killAll(id string) {
	for range 100 {
		pids := pidsOf(id)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
