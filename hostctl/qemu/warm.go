package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
	"froog.tech/froog/tunnel"
)

// The files of a paused VM that gave up its process (Save): its memory and
// the machine it fits.
const (
	memoryFile  = "memory.state"
	machineFile = "memory.machine"
)

// Save writes a paused VM's memory next to its disk and ends its QEMU
// process: the host gets the memory back, and the next Start restores the
// VM with every process still running (hostctl.Saver). A VM that is not
// paused is left as it is.
func (d *Driver) Save(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	vm := d.attach(sb.ID)
	if vm == nil {
		return nil
	}
	st, err := vm.status(ctx)
	if err != nil || st != "paused" {
		vm.close()
		return err
	}
	// The accelerator the VM really runs with: the restore must use it.
	var kvm struct {
		Enabled bool `json:"enabled"`
	}
	if err := vm.run(ctx, "query-kvm", nil, &kvm); err != nil {
		vm.close()
		return err
	}
	size, err := d.size(sb)
	if err != nil {
		vm.close()
		return err
	}
	machine := machine{Accel: map[bool]string{true: "kvm", false: "tcg"}[kvm.Enabled], Size: size}
	tmp := d.file(sb.ID, memoryFile+".new")
	err = vm.run(ctx, "migrate", map[string]any{"uri": "exec:cat > " + shellQuote(tmp)}, nil)
	if err == nil {
		err = vm.migrated(ctx)
	}
	vm.close()
	if err == nil {
		err = os.WriteFile(d.file(sb.ID, machineFile), []byte(machine.String()), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, d.file(sb.ID, memoryFile))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("qemu: saving the memory of %s: %w", sb.ID, err)
	}
	return d.stopLocked(ctx, sb.ID)
}

// restore starts a VM from its saved memory, if it has one that fits its
// machine now, and resumes it. A saved memory is used once: when the
// restore fails, the VM boots from its disk instead (its processes are
// lost, and the log says so).
func (d *Driver) restore(ctx context.Context, sb *store.Sandbox) (hostctl.Endpoint, bool) {
	b, err := os.ReadFile(d.file(sb.ID, machineFile))
	if err != nil {
		return hostctl.Endpoint{}, false
	}
	defer d.forgetMemory(sb.ID)
	saved, err := parseMachine(string(b))
	size, serr := d.size(sb)
	if err == nil && serr != nil {
		err = serr
	}
	if err == nil && saved.Size != size {
		err = fmt.Errorf("the memory was saved on a %s machine, and this start has %d vCPUs and %d MB", saved, size.CPUs, size.MemoryMB)
	}
	if err == nil {
		err = d.boot(ctx, sb, saved.Accel, true)
	}
	if err == nil {
		err = d.incoming(ctx, sb.ID)
	}
	var ep hostctl.Endpoint
	if err == nil {
		ep, err = d.endpoint(ctx, sb.ID)
	}
	if err != nil {
		d.o.Logger.Warn("qemu: restoring a saved VM failed; booting from its disk, its processes are lost",
			slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
		d.kill(sb.ID) // one that does not exit fails the boot that follows, with the reason
		return hostctl.Endpoint{}, false
	}
	return ep, true
}

// incoming loads the saved memory into a VM started with -incoming defer
// and resumes it.
func (d *Driver) incoming(ctx context.Context, id string) error {
	vm := d.attach(id)
	if vm == nil {
		return errors.New("the monitor does not answer")
	}
	defer vm.close()
	if err := vm.run(ctx, "migrate-incoming", map[string]any{"uri": "exec:cat " + shellQuote(d.file(id, memoryFile))}, nil); err != nil {
		return err
	}
	for {
		st, err := vm.status(ctx)
		if err != nil {
			return err
		}
		switch st {
		case "inmigrate":
		case "paused":
			return vm.run(ctx, "cont", nil, nil)
		case "running":
			return nil
		default:
			return fmt.Errorf("the VM is %s after loading its memory", st)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// machine is what a saved memory fits: the accelerator it ran with and
// the size.
type machine struct {
	Accel string
	Size  Size
}

func (m machine) String() string {
	return fmt.Sprintf("%s %d %d", m.Accel, m.Size.CPUs, m.Size.MemoryMB)
}

// parseMachine reads what machine.String wrote.
func parseMachine(s string) (machine, error) {
	var m machine
	var rest string
	n, _ := fmt.Sscanf(s, "%s %d %d%s", &m.Accel, &m.Size.CPUs, &m.Size.MemoryMB, &rest)
	if n != 3 || (m.Accel != "kvm" && m.Accel != "tcg") || m.Size.CPUs < 1 || m.Size.MemoryMB < 1 {
		return machine{}, fmt.Errorf("the saved machine %q is not accelerator, vCPUs, MB", s)
	}
	return m, nil
}

func (d *Driver) forgetMemory(id string) {
	os.Remove(d.file(id, memoryFile))
	os.Remove(d.file(id, machineFile))
}

// migrated waits until an outgoing migration ends.
func (m *monitor) migrated(ctx context.Context) error {
	for {
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := m.run(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("migration %s: %s", st.Status, st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// authorizedKeys are the keys that may log in to the sandbox as user: the
// control key and the account's keys, without their comments (the seed
// is YAML, and a comment is free text). A key that does not parse is left
// out, and the log says which.
func (d *Driver) authorizedKeys(id string, account []string) []string {
	keys := []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(d.o.ControlKey.PublicKey())))}
	for _, line := range account {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			d.o.Logger.Warn("qemu: an account key does not parse; left out", slog.String("sandbox", id), slog.String("error", err.Error()))
			continue
		}
		keys = append(keys, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
	}
	return keys
}

// authorize waits for cloud-init to finish where the image has it (a
// guest is ready only then: user, keys and hostname in place) and writes
// keys to the guest user's ~/.ssh/authorized_keys: at every start, so
// that a key added or removed since the last start counts from this one
// on, whatever cloud-init does on later boots (it applies the seed's keys
// on an instance's first boot only).
func (d *Driver) authorize(ctx context.Context, ep hostctl.Endpoint, keys []string) error {
	// cloud-init writes result.json under /run when a boot's stages are
	// done (its "status --wait" can wait on past that, on Debian 13).
	return d.guestRun(ctx, ep, d.o.BootTimeout, strings.Join(keys, "\n")+"\n",
		`if command -v cloud-init >/dev/null; then while [ ! -e /run/cloud-init/result.json ]; do sleep 0.2; done; fi
umask 077 && mkdir -p ~/.ssh && cat > ~/.ssh/authorized_keys.new && mv -f ~/.ssh/authorized_keys.new ~/.ssh/authorized_keys`)
}

// syncGuest has a running guest write what it holds to its disk, before
// the VM is paused: QEMU ending a paused VM is a power cut for the guest,
// and what the guest had not written (a file, the host keys cloud-init
// made on the first boot) would be lost. A guest that does not answer is
// paused all the same; the log says so.
func (d *Driver) syncGuest(ctx context.Context, id string) {
	ep, err := d.address(id)
	if err == nil {
		err = d.guestRun(ctx, ep, 10*time.Second, "", "sync")
	}
	if err != nil {
		d.o.Logger.Warn("qemu: the guest did not sync its disk before the pause", slog.String("sandbox", id), slog.String("error", err.Error()))
	}
}

// guestRun runs cmd in the guest as user, logged in with the control key
// against the pinned host key, with stdin, within timeout.
func (d *Driver) guestRun(ctx context.Context, ep hostctl.Endpoint, timeout time.Duration, stdin, cmd string) error {
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, err := tunnel.DialSSH(ctx, net.JoinHostPort(ep.Host, fmt.Sprint(ep.Port)), "user", d.o.ControlKey, hostKey)
	if err != nil {
		return err
	}
	defer client.Close()
	stop := context.AfterFunc(ctx, func() { client.Close() }) // the timeout covers the command too
	defer stop()
	s, err := client.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	s.Stdin = strings.NewReader(stdin)
	if out, err := s.CombinedOutput(cmd); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
