package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
)

// boot starts QEMU for the sandbox with accel; QEMU daemonizes once the VM
// is set up. incoming: the VM waits for its memory (migrate-incoming)
// instead of booting.
func (d *Driver) boot(ctx context.Context, sb *store.Sandbox, accel string, incoming bool) error {
	size, err := d.size(sb)
	if err != nil {
		return err
	}
	img, err := d.image(sb)
	if err != nil {
		return err
	}
	netdev, port := "", 22
	if d.tap != nil {
		tap, err := d.tap.plug(sb.ID)
		if err != nil {
			return err
		}
		netdev = "tap,id=net0,ifname=" + tap + ",script=no,downscript=no"
	} else {
		p, err := freePort(d.o.Addr)
		if err != nil {
			return err
		}
		port = p
		netdev = fmt.Sprintf("user,id=net0,hostfwd=tcp:%s:%d-:22", d.o.Addr, port)
	}
	if err := os.WriteFile(d.file(sb.ID, "ssh_port"), []byte(strconv.Itoa(port)), 0o600); err != nil {
		return err
	}
	os.Remove(d.file(sb.ID, "qmp.sock"))
	if !incoming {
		os.Remove(d.file(sb.ID, "console.log")) // a new boot, a new console
	}
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	args := []string{
		"-name", "froog-" + sb.ID,
		"-machine", "q35,accel=" + accel, "-cpu", cpu,
		"-smp", strconv.Itoa(size.CPUs), "-m", strconv.Itoa(size.MemoryMB),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		// Appended to: a restored VM's console goes on where it was.
		"-chardev", "file,id=console,append=on,path=" + d.file(sb.ID, "console.log"), "-serial", "chardev:console",
		"-kernel", img.Kernel, "-initrd", img.Initrd, "-append", cmdline(img.Cmdline, accel, hostTSCkHz()),
		"-drive", "file=" + d.file(sb.ID, "disk.qcow2") + ",if=virtio,format=qcow2,cache=writeback",
		"-drive", "file=" + d.file(sb.ID, "seed.iso") + ",if=virtio,format=raw,readonly=on",
		"-netdev", netdev,
		"-device", "virtio-net-pci,netdev=net0,mac=" + macAddress(sb.ID),
		"-device", "virtio-rng-pci",
		"-qmp", "unix:" + d.file(sb.ID, "qmp.sock") + ",server=on,wait=off",
		"-pidfile", d.file(sb.ID, "qemu.pid"),
		"-daemonize",
	}
	if incoming {
		args = append(args, "-incoming", "defer")
	}
	// The QEMU this one follows (ended by kill, or quit) may still hold
	// the disk's lock for a moment after it counts as gone: a start that
	// fails on the lock is tried again, for up to 30 s.
	for deadline := time.Now().Add(30 * time.Second); ; {
		cmd := exec.CommandContext(ctx, d.o.QEMU, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err == nil {
			break
		}
		if !strings.Contains(out.String(), `Failed to get "write" lock`) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("qemu: starting %s: %v: %s", sb.ID, err, strings.TrimSpace(out.String()))
		}
		d.o.Logger.Info("qemu: the disk is still locked; starting again", slog.String("sandbox", sb.ID))
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	if d.auto && accel == "kvm" && !incoming {
		if err := d.kvmProgress(ctx, sb.ID); err != nil {
			return err
		}
	}
	d.o.Logger.Info("qemu: booted", slog.String("sandbox", sb.ID), slog.String("accel", accel), slog.Int("ssh_port", port))
	return nil
}

// cmdline is the guest kernel's command line under accel: the image's,
// and under TCG tsc=reliable and, where it is known (tscKHz above 0),
// the TSC's frequency. A TCG guest's TSC is the host's, but on a loaded
// host the kernel's clocksource watchdog sees its reads delayed (the vCPU
// thread waits for a core), marks it unstable and moves to the HPET,
// whose every read QEMU then emulates: both Debian guests of a boot run
// on a load of 20 did, 220 and 700 s into their boots. With the watchdog
// off, the TSC's rate must be right from the start, and the kernel's own
// measure of it is not: a Debian 13 guest booted beside make test's
// other VMs timed the emulated PIT at 38.6 MHz against the HPET's
// 2,695, took the PIT's (the kernel's rule when the two differ), and its
// clock ran 70 times fast (its SSH server's timeouts with it).
// tsc_early_khz skips that measure. Under KVM the image's line is kept.
func cmdline(image, accel string, tscKHz int) string {
	if accel != "tcg" {
		return image
	}
	line := image + " tsc=reliable"
	if tscKHz > 0 {
		line += " tsc_early_khz=" + strconv.Itoa(tscKHz)
	}
	return strings.TrimSpace(line)
}

// kvmProgress checks a guest that KVM was chosen for without being asked:
// some hosts have a /dev/kvm whose guests start and then never run (a
// nested host without the CPU features). Under KVM the kernel writes to
// the console within a second; a console still empty after 10 seconds
// means KVM does not work here, and the VM is ended.
func (d *Driver) kvmProgress(ctx context.Context, id string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if fi, err := os.Stat(d.file(id, "console.log")); err == nil && fi.Size() > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := d.kill(id); err != nil {
		return err
	}
	return errors.New("qemu: a KVM guest wrote nothing to its console in 10 s")
}

// endpoint waits until the guest's SSH server answers and returns where
// it is, with the pinned key: as long as the boot progresses (bootWatch).
func (d *Driver) endpoint(ctx context.Context, id string) (hostctl.Endpoint, error) {
	ep, err := d.address(id)
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	addr := net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
	w := newBootWatch(d.o.BootTimeout, time.Now())
	var probed time.Time
	for {
		if w.sshdUp() || time.Since(probed) >= probeEvery {
			probed = time.Now()
			if sshAnswers(addr, ep.HostKey, w.probeWait()) {
				return ep, nil
			}
		}
		if !d.alive(id) {
			return hostctl.Endpoint{}, fmt.Errorf("qemu: %s exited while booting: %s", id, d.consoleTail(id))
		}
		console, _ := os.ReadFile(d.file(id, "console.log"))
		if err := w.observe(time.Now(), console, cpuTicks(d.pid(id))); err != nil {
			return hostctl.Endpoint{}, fmt.Errorf("qemu: %s's SSH server did not answer: %w; last console lines: %s", id, err, d.consoleTail(id))
		}
		if len(console) > 0 { // a restored or resumed guest writes nothing: it is not booting
			hostctl.ReportProgress(ctx, "booting: "+w.stage)
		}
		select {
		case <-ctx.Done():
			return hostctl.Endpoint{}, fmt.Errorf("qemu: waiting for %s's SSH server (at %s): %w", id, w.stage, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probeEvery spaces the probes of a guest whose console does not yet
// show its SSH server started (bootWatch.sshdUp; from then on a probe
// follows the last at once). Under user-mode networking every probe
// made before the guest's network is up stays in QEMU as a connection
// it keeps trying to open, and each reaches sshd as soon as it listens:
// probed every 100 ms, a Debian 13 guest under TCG met 30 at once, past
// its sshd's limit of 10 unauthenticated connections, before its first
// login.
const probeEvery = 3 * time.Second

// address is where the VM's SSH server listens, with its host key.
func (d *Driver) address(id string) (hostctl.Endpoint, error) {
	b, err := os.ReadFile(d.file(id, "ssh_port"))
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	port, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	_, pub, err := d.hostKey(id)
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	ep := hostctl.Endpoint{Host: d.o.Addr, Port: port, HostKey: pub}
	if d.tap != nil {
		a, err := d.sandboxAddr(id)
		if err != nil {
			return hostctl.Endpoint{}, err
		}
		ep.Host = a.String()
		if a6 := d.tap.address6(a); a6.IsValid() {
			ep.IPv6 = a6.String()
		}
	}
	return ep, nil
}

// sshAnswers reports whether the guest's SSH server on addr greets
// within patience, then completes a key exchange and proves it holds the
// pinned host key (hostKey, authorized_keys format): a greeting alone is
// not enough, as a guest's sshd may greet and then drop the connection
// while it still starts (seen on the OS image's forks). The probe ends
// at authentication: it offers none. User-mode networking accepts the TCP
// connection before the guest listens, so the connection alone says
// nothing.
//
// A server that greets is given kexWait for the rest: every connection
// costs a booting guest a process of its own, and under TCG a key
// exchange takes seconds; a probe given up halfway is that work lost and
// another begun (a Debian 13 guest saw 25 in 7 s before its first login).
func sshAnswers(addr, hostKey string, patience time.Duration) bool {
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(patience))
	c = &greetedConn{Conn: c}
	verified := false
	cfg := &ssh.ClientConfig{User: "froog-probe", HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
		verified = bytes.Equal(k.Marshal(), pinned.Marshal())
		if !verified {
			return errors.New("not the pinned host key")
		}
		return nil
	}}
	if conn, _, _, err := ssh.NewClientConn(c, addr, cfg); err == nil {
		conn.Close() // a server that lets anyone in: the key was still checked
	}
	return verified
}

// kexWait bounds a probe's key exchange once the server has greeted.
const kexWait = 30 * time.Second

// greetedConn gives a connection kexWait from its first bytes read.
type greetedConn struct {
	net.Conn
	greeted bool
}

func (c *greetedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.greeted {
		c.greeted = true
		c.Conn.SetDeadline(time.Now().Add(kexWait))
	}
	return n, err
}

// virtioQueues is QEMU's side of the VM's virtio queues (QEMU 7.0 and
// later), for a guest that hangs: per queue, how far the guest's
// requests go (avail), how many QEMU took and holds (taken, in use), how
// many it finished (used) and told the guest of (signalled).
func (d *Driver) virtioQueues(ctx context.Context, id string) string {
	m := d.attach(id)
	if m == nil {
		return "no monitor"
	}
	defer m.close()
	var devices []struct{ Name, Path string }
	if err := m.run(ctx, "x-query-virtio", nil, &devices); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, dev := range devices {
		for q := range 8 {
			var st struct {
				Avail     uint16 `json:"shadow-avail-idx"`
				Taken     uint16 `json:"last-avail-idx"`
				InUse     uint32 `json:"inuse"`
				Used      uint16 `json:"used-idx"`
				Signalled uint16 `json:"signalled-used"`
			}
			if m.run(ctx, "x-query-virtio-queue-status", map[string]any{"path": dev.Path, "queue": q}, &st) != nil {
				break // past its last queue
			}
			fmt.Fprintf(&b, "%s %s q%d: avail %d taken %d in use %d used %d signalled %d; ",
				dev.Name, path.Base(path.Dir(dev.Path)), q, st.Avail, st.Taken, st.InUse, st.Used, st.Signalled)
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// consoleTail is what the console says of the guest's end: when its
// kernel panicked, the panic's summary (panicSummary), else its last whole
// lines, up to 400 bytes.
func (d *Driver) consoleTail(id string) string {
	b, _ := os.ReadFile(d.file(id, "console.log"))
	if s := panicSummary(b); s != "" {
		return s
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) > 400 {
		b = b[len(b)-400:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}

// panicSummary is what a guest kernel's panic on the console says of
// itself, without timestamps: the oops's first line, where it happened
// (RIP), the first calls of its trace and the panic's reason. "" when the
// console shows no panic. The console's last lines are the register dump
// and the panic's last words, which name neither the fault nor its place.
func panicSummary(console []byte) string {
	lines := strings.Split(string(console), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(kernelTimestamp.ReplaceAllString(strings.TrimRight(l, "\r"), ""))
	}
	end := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Kernel panic - not syncing") })
	if end < 0 {
		return ""
	}
	var out []string
	if oops := slices.IndexFunc(lines[:end], isOops); oops >= 0 {
		out = append(out, lines[oops])
		rip, calls, trace := false, 0, false
		for _, l := range lines[oops+1 : end] {
			switch {
			case !rip && strings.HasPrefix(l, "RIP: "):
				rip = true
				out = append(out, l)
			case l == "Call Trace:":
				trace = true
			case trace && calls < 4 && strings.Contains(l, "+0x") && !strings.HasPrefix(l, "?"):
				calls++
				out = append(out, l)
			}
		}
	}
	return strings.Join(append(out, lines[end]), "; ")
}

// kernelTimestamp is the time the kernel puts before each console line.
var kernelTimestamp = regexp.MustCompile(`^\[\s*\d+\.\d+\]\s?`)

// isOops reports whether a console line starts a kernel's oops or BUG.
func isOops(l string) bool {
	for _, p := range []string{"BUG:", "Oops", "general protection fault", "invalid opcode", "kernel BUG at", "double fault"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// pid is the VM's QEMU process, from its pid file; 0 if none.
func (d *Driver) pid(id string) int {
	b, err := os.ReadFile(d.file(id, "qemu.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Exited reports whether process pid has ended: gone, or a zombie whose
// last thread is gone. A QEMU that died but is not reaped yet
// (daemonized, its parent is init, which reaps it when it gets to it) is
// a zombie: dead, once its last thread is gone. Its main thread shows Z
// as soon as it exits, while the others may still be ending (one busy
// writing the disk out), holding its files and the disk's lock: a new
// QEMU on the disk fails with "Failed to get "write" lock".
func Exited(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	if bytes.Contains(status, []byte("\nState:\tZ")) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		return len(tasks) <= 1
	}
	return false
}

// alive reports whether the VM's QEMU process runs (and is QEMU: a pid
// may be reused after a reboot of the host).
func (d *Driver) alive(id string) bool {
	pid := d.pid(id)
	if Exited(pid) {
		return false
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	if bytes.Contains(status, []byte("\nState:\tZ")) {
		return true // its other threads are still ending
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	// A QEMU on its way out has no command line any more (its memory goes
	// before its files do): alive while it is still QEMU by name.
	return bytes.Contains(cmdline, []byte("froog-"+id)) || (len(cmdline) == 0 && bytes.HasPrefix(status, []byte("Name:\tqemu")))
}

// kill ends the VM's QEMU process, if it runs, and waits until it is gone
// and its disk's lock with it: a process busy in the kernel can take
// seconds to exit after SIGKILL, and a new QEMU could not open the disk.
func (d *Driver) kill(id string) error {
	if pid := d.pid(id); pid > 0 && d.alive(id) {
		syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(30 * time.Second); d.alive(id); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("qemu: the QEMU of %s (pid %d) does not exit after SIGKILL", id, pid)
			}
		}
	}
	os.Remove(d.file(id, "qemu.pid"))
	// A QEMU of the sandbox that the pid file does not name ends too (one
	// still exiting 10 s after its quit, which removed the file first): a
	// stopped sandbox keeps no process, whatever the file says.
	for _, pid := range qemusOf(id) {
		d.o.Logger.Warn("qemu: a QEMU of the sandbox that its pid file does not name; ending it", slog.String("sandbox", id), slog.Int("pid", pid))
		syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(30 * time.Second); !Exited(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("qemu: a QEMU of %s (pid %d) does not exit after SIGKILL", id, pid)
			}
		}
	}
	return nil
}

// qemusOf lists the processes started as the sandbox's QEMU (-name
// froog-ID) that have not exited.
func qemusOf(id string) []int {
	want := []byte("\x00-name\x00froog-" + id + "\x00")
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, want) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && !Exited(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// attach connects to a running VM's monitor, or returns nil.
func (d *Driver) attach(id string) *monitor {
	if !d.alive(id) {
		return nil
	}
	m, err := dialMonitor(d.file(id, "qmp.sock"), 2*time.Second)
	if err != nil {
		d.o.Logger.Warn("qemu: monitor", slog.String("sandbox", id), slog.String("error", err.Error()))
		return nil
	}
	return m
}

func freePort(ip string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
