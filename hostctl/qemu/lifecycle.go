package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/sshkey"
	"froog.tech/froog/store"
)

// Start boots the sandbox from its disk, restores it when its memory was
// saved, resumes it when it is paused, or finds it running (also one a
// previous driver started). Then it writes keys and the control key into
// the guest user's authorized_keys.
//
// Under --accel auto, KVM is on trial until a VM has booted with it: some
// hosts have a /dev/kvm whose guests start and then hang, or boot with
// broken devices. Until then, a cold boot under KVM that fails in any way
// switches the driver to TCG and boots again.
func (d *Driver) Start(ctx context.Context, sb *store.Sandbox, keys []string) (hostctl.Endpoint, error) {
	if d.tap != nil {
		// Before the KVM trial: a network that fails says nothing of KVM.
		if err := d.tap.ready(); err != nil {
			return hostctl.Endpoint{}, err
		}
	}
	defer d.lock(sb.ID)()
	keys = d.authorizedKeys(sb.ID, keys)
	ep, accel, err := d.startAndAuthorize(ctx, sb, keys)
	d.mu.Lock()
	trial := d.auto && accel == "kvm" && ctx.Err() == nil // a start cut short says nothing of KVM
	if trial && err == nil {
		d.auto = false // KVM works here
	}
	if trial && err != nil {
		d.accel = "tcg"
		kvmFailed.Store(true)
	}
	d.mu.Unlock()
	if trial && err != nil {
		d.o.Logger.Warn("qemu: KVM does not work here, using TCG", slog.String("error", err.Error()))
		if err := d.kill(sb.ID); err != nil {
			return hostctl.Endpoint{}, err
		}
		ep, _, err = d.startAndAuthorize(ctx, sb, keys)
	}
	return ep, err
}

// startAndAuthorize starts the VM and writes its authorized keys; accel
// is the accelerator of a cold boot ("" when there was none).
func (d *Driver) startAndAuthorize(ctx context.Context, sb *store.Sandbox, keys []string) (hostctl.Endpoint, string, error) {
	ep, accel, err := d.start(ctx, sb, keys)
	if err == nil {
		hostctl.ReportProgress(ctx, "the guest's SSH server answers; writing its keys")
		if err = d.authorize(ctx, ep, keys); err != nil {
			err = fmt.Errorf("qemu: writing the authorized keys of %s: %w", sb.ID, err)
		}
	}
	return ep, accel, err
}

func (d *Driver) start(ctx context.Context, sb *store.Sandbox, keys []string) (hostctl.Endpoint, string, error) {
	if vm := d.attach(sb.ID); vm != nil {
		defer vm.close()
		st, err := vm.status(ctx)
		if err != nil {
			return hostctl.Endpoint{}, "", err
		}
		if st == "paused" {
			hostctl.ReportProgress(ctx, "resuming")
			if err := vm.api(ctx).Cont(); err != nil {
				return hostctl.Endpoint{}, "", err
			}
		}
		if st == "running" || st == "paused" {
			ep, err := d.endpoint(ctx, sb.ID)
			return ep, "", err
		}
	}
	// Shut down or crashed inside, or a QEMU whose monitor does not
	// answer: boot again from the disk.
	if err := d.kill(sb.ID); err != nil {
		return hostctl.Endpoint{}, "", err
	}
	if err := d.prepare(sb); err != nil {
		return hostctl.Endpoint{}, "", err
	}
	if ep, ok := d.restore(ctx, sb); ok {
		return ep, "", nil
	}
	if err := d.writeSeed(sb, keys); err != nil {
		return hostctl.Endpoint{}, "", err
	}
	accel := d.Accel()
	for boot := 1; ; boot++ {
		if err := d.boot(ctx, sb, accel, false); err != nil {
			return hostctl.Endpoint{}, accel, err
		}
		ep, err := d.endpoint(ctx, sb.ID)
		if err == nil || boot == bootsAfterFaults {
			return ep, accel, err
		}
		var stalled *stallError
		if d.alive(sb.ID) {
			if !errors.As(err, &stalled) || !stalled.early {
				return ep, accel, err
			}
			d.o.Logger.Warn("qemu: the guest hung before its init ran; booting it again",
				slog.String("sandbox", sb.ID), slog.Int("boot", boot), slog.String("error", stalled.Error()),
				slog.String("virtio", d.virtioQueues(ctx, sb.ID)), slog.String("console", d.consoleTail(sb.ID)))
			if err := d.kill(sb.ID); err != nil {
				return ep, accel, err
			}
			hostctl.ReportProgress(ctx, "the guest hung while booting; booting again")
			continue
		}
		console, _ := os.ReadFile(d.file(sb.ID, "console.log"))
		summary := panicSummary(console)
		if summary == "" {
			return ep, accel, err
		}
		d.o.Logger.Warn("qemu: the guest's kernel panicked while booting; booting it again",
			slog.String("sandbox", sb.ID), slog.Int("boot", boot), slog.String("panic", summary))
		hostctl.ReportProgress(ctx, "the guest's kernel panicked; booting again")
	}
}

// bootsAfterFaults is how many boots a guest gets, one after another,
// while each fails before its init has run: its kernel panics, or it
// hangs with QEMU idle (stallError.early). Nothing of the sandbox has run
// by then, and under TCG both happen to boots that the next one goes by:
//   - Debian 13's kernel (6.12) with two vCPUs panicked in early boot in 1
//     of 60 boots on a loaded host: "Oops: int3" in an interrupt, at a
//     site the kernel was patching on the other vCPU (a static key:
//     text_poke_bp's int3, still seen there by QEMU's multi-threaded TCG
//     after the patch was done);
//   - the test guest (one vCPU) stood still in its initramfs once in six
//     runs of make test on a loaded host, QEMU idle, its last line
//     virtio_blk's size of its first disk (the log's virtio line has
//     QEMU's side of each queue, to tell a request QEMU never took or
//     finished from a completion the guest never saw).
const bootsAfterFaults = 3

// writeSeed writes the seed of the next cold boot: the host key, the keys
// that may log in, the name and the network.
func (d *Driver) writeSeed(sb *store.Sandbox, keys []string) error {
	keyPEM, pub, err := d.hostKey(sb.ID)
	if err != nil {
		return err
	}
	seed := Seed{InstanceID: sb.ID, Hostname: sb.Name, HostKeyPEM: keyPEM, HostKeyPublic: pub, AuthorizedKeys: keys,
		Address: "10.0.2.15/24", Gateway: "10.0.2.2", DNS: "10.0.2.3"} // QEMU's user-mode network
	if d.tap != nil {
		addr, err := d.tap.address(filepath.Join(d.o.Dir, "sandboxes"), sb.ID)
		if err != nil {
			return err
		}
		seed.Address = netip.PrefixFrom(addr, d.tap.subnet.Bits()).String()
		seed.Gateway, seed.DNS = d.tap.host.String(), d.tap.host.String()
		if a6 := d.tap.address6(addr); a6.IsValid() {
			seed.Address6, seed.Gateway6 = netip.PrefixFrom(a6, d.tap.subnet6.Bits()).String(), d.tap.host6.String()
		}
	}
	return os.WriteFile(d.file(sb.ID, "seed.iso"), seed.ISO(time.Now()), 0o600)
}

// HostKey makes the sandbox's SSH host key (once) and returns its public
// half: hostctl pins it in the store before the guest ever boots.
func (d *Driver) HostKey(ctx context.Context, sb *store.Sandbox) (string, error) {
	defer d.lock(sb.ID)()
	if err := os.MkdirAll(d.dir(sb.ID), 0o700); err != nil {
		return "", err
	}
	_, pub, err := d.hostKey(sb.ID)
	return pub, err
}

// hostKey returns the sandbox's SSH host key (OpenSSH PEM), made on first
// use, and its public half.
func (d *Driver) hostKey(id string) (string, string, error) {
	s, pemBytes, err := sshkey.LoadOrCreate(d.file(id, "host_key"), "")
	if err != nil {
		return "", "", fmt.Errorf("qemu: host key of %s: %w", id, err)
	}
	return string(pemBytes), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))), nil
}

// Check reports a VM that is gone (its QEMU died on its own) or that its
// guest shut down or crashed, with what the console said last.
func (d *Driver) Check(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	if !d.alive(sb.ID) {
		return fmt.Errorf("the VM's QEMU process exited; last console lines: %s", d.consoleTail(sb.ID))
	}
	vm := d.attach(sb.ID)
	if vm == nil {
		return errors.New("the VM's monitor does not answer")
	}
	defer vm.close()
	st, err := vm.status(ctx)
	if err != nil {
		return err
	}
	switch st {
	case "running", "paused":
		return nil
	}
	return fmt.Errorf("the VM is %s; last console lines: %s", st, d.consoleTail(sb.ID))
}

// Fork copies src's disk to dst, which has none yet: a running source is
// copied live by a backup job (paused for the copy, QMP stop then cont,
// should that fail), so the copy is consistent.
// Only the overlay is copied; both share the base disk. dst gets its own
// host key at its first start.
func (d *Driver) Fork(ctx context.Context, src, dst *store.Sandbox) error {
	if src.ID == dst.ID {
		return errors.New("qemu: a sandbox cannot fork itself")
	}
	unlockDst := d.lock(dst.ID)
	defer unlockDst()
	target := d.file(dst.ID, "disk.qcow2")
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	defer d.lock(src.ID)()
	if _, err := os.Stat(d.file(src.ID, "disk.qcow2")); err != nil {
		return fmt.Errorf("qemu: the disk to fork: %w", err)
	}
	if vm := d.attach(src.ID); vm != nil {
		st, err := vm.status(ctx)
		vm.close() // QMP takes one client at a time: pause attaches again
		if err != nil {
			return err
		}
		if st == "running" {
			if err := os.MkdirAll(d.dir(dst.ID), 0o700); err != nil {
				return err
			}
			// Copied live, as a snapshot is (see backup).
			err := d.backup(ctx, src.ID, "fork-"+dst.ID, target)
			if err == nil || ctx.Err() != nil {
				return err
			}
			d.o.Logger.Warn("qemu: a live backup for a fork failed; pausing the source for the copy instead", slog.String("sandbox", src.ID), slog.String("error", err.Error()))
			if err := d.pause(ctx, src.ID); err != nil {
				return err
			}
			defer func() {
				if vm := d.attach(src.ID); vm != nil {
					vm.api(context.WithoutCancel(ctx)).Cont()
					vm.close()
				}
			}()
		}
	}
	if err := os.MkdirAll(d.dir(dst.ID), 0o700); err != nil {
		return err
	}
	return copyDisk(ctx, d.file(src.ID, "disk.qcow2"), target)
}

// Pause freezes the VM (QMP stop): every process keeps its state, and a
// Start within the warm window resumes it in about a second.
func (d *Driver) Pause(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	return d.pause(ctx, sb.ID)
}

// pause syncs a running guest's disk and freezes the VM.
func (d *Driver) pause(ctx context.Context, id string) error {
	vm := d.attach(id)
	if vm == nil {
		return nil
	}
	defer vm.close()
	st, err := vm.status(ctx)
	if err != nil || st != "running" {
		return err
	}
	d.syncGuest(ctx, id)
	return vm.api(ctx).Stop()
}

// Stop ends the VM and forgets its saved memory; its disk stays for the
// next Start, which boots from it.
func (d *Driver) Stop(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	d.forgetMemory(sb.ID)
	if err := d.pause(ctx, sb.ID); err != nil { // a running guest syncs its disk first
		d.o.Logger.Warn("qemu: pausing before the stop", slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
	}
	return d.stopLocked(ctx, sb.ID)
}

func (d *Driver) stopLocked(ctx context.Context, id string) error {
	if vm := d.attach(id); vm != nil {
		// quit ends QEMU after flushing what it holds of the disk. QEMU
		// removes its pid file as it quits, long before it has exited
		// (its memory freed, its threads ended): the wait is on the pid.
		pid := d.pid(id)
		err := vm.api(ctx).Quit()
		vm.close()
		for deadline := time.Now().Add(10 * time.Second); !Exited(pid) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && Exited(pid) && !strings.Contains(err.Error(), "closed") {
			d.o.Logger.Warn("qemu: quit", slog.String("sandbox", id), slog.String("error", err.Error()))
		}
	}
	if err := d.kill(id); err != nil { // one that did not quit, or whose monitor does not answer
		return err
	}
	os.Remove(d.file(id, "qmp.sock"))
	if d.tap != nil {
		d.tap.unplug(id)
		if a, err := d.sandboxAddr(id); err == nil {
			d.tap.closePorts(id, d.tap.address6(a))
		}
	}
	return nil
}

// Delete ends the VM and removes its folder.
func (d *Driver) Delete(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	d.stopLocked(ctx, sb.ID)
	return os.RemoveAll(d.dir(sb.ID))
}
