package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
)

// Snapshots are whole copies of a sandbox's qcow2 overlay, each its own
// file in the snapshots folder, backed (like every overlay) by the
// read-only base disk of its OS. Not external snapshots that chain
// overlays (blockdev-snapshot-sync): a chain ties every snapshot to the
// ones before it and to the live disk, so deleting or restoring one
// means block-commits while the VM runs, and the chain grows each hour.
// Copies are independent: a restore is a file rename, a delete a file
// remove, a saved snapshot outlives its sandbox, a fork copies one file.
// The cost is the copy's time and space, which the docs accept ("a
// snapshot copies the full disk").
//
// A running VM is copied while it runs (see backup: the guest syncs its
// file systems, then a QMP backup job copies the disk as it was at the
// job's start); should that fail, it is paused for a plain copy (QMP
// stop drains and flushes QEMU's own cache) and runs on after. A paused
// or stopped VM's disk is at rest and copied as it is. A restore never touches a
// running VM's disk: it refuses while the VM's QEMU is alive, and hostctl
// stops the VM first.

var _ hostctl.Snapshotter = (*Driver)(nil)

func (d *Driver) snapshotFile(id string) string {
	return filepath.Join(d.o.Dir, "snapshots", id+".qcow2")
}

// Snapshot copies the sandbox's disk to the snapshot's file.
func (d *Driver) Snapshot(ctx context.Context, sb *store.Sandbox, id string) (int64, error) {
	defer d.lock(sb.ID)()
	defer d.lock("snapshot " + id)()
	disk := d.file(sb.ID, "disk.qcow2")
	if _, err := os.Stat(disk); err != nil {
		return 0, fmt.Errorf("qemu: snapshot: the sandbox has no disk yet: %w", err)
	}
	if vm := d.attach(sb.ID); vm != nil {
		st, err := vm.status(ctx)
		vm.close() // QMP takes one client at a time: pause attaches again
		if err != nil {
			return 0, err
		}
		if st == "running" {
			if err := os.MkdirAll(filepath.Dir(d.snapshotFile(id)), 0o700); err != nil {
				return 0, err
			}
			err := d.backup(ctx, sb.ID, "backup-"+id, d.snapshotFile(id))
			if err == nil || ctx.Err() != nil {
				return fileBytes(d.snapshotFile(id)), err
			}
			d.o.Logger.Warn("qemu: a live backup failed; pausing the VM for the copy instead", slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
			if err := d.pause(ctx, sb.ID); err != nil {
				return 0, err
			}
			defer func() {
				if vm := d.attach(sb.ID); vm != nil {
					vm.api(context.WithoutCancel(ctx)).Cont()
					vm.close()
				}
			}()
		}
	}
	to := d.snapshotFile(id)
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return 0, err
	}
	if err := copyDisk(ctx, disk, to); err != nil {
		return 0, fmt.Errorf("qemu: snapshot of %s: %w", sb.ID, err)
	}
	return fileBytes(to), nil
}

// Restore replaces the sandbox's disk with the snapshot's copy (copied
// beside it, then renamed over it), and forgets a saved memory, which
// belongs to the old disk. The VM must not run.
func (d *Driver) Restore(ctx context.Context, sb *store.Sandbox, id string) error {
	defer d.lock(sb.ID)()
	defer d.lock("snapshot " + id)()
	if d.alive(sb.ID) {
		return errors.New("qemu: restore: the VM is running; stop it first")
	}
	from := d.snapshotFile(id)
	if _, err := os.Stat(from); err != nil {
		return fmt.Errorf("qemu: restore: snapshot %s: %w", id, err)
	}
	if err := os.MkdirAll(d.dir(sb.ID), 0o700); err != nil {
		return err
	}
	if err := copyDisk(ctx, from, d.file(sb.ID, "disk.qcow2")); err != nil {
		return fmt.Errorf("qemu: restore of %s: %w", sb.ID, err)
	}
	d.forgetMemory(sb.ID)
	return nil
}

// ForkSnapshot copies the snapshot to dst's disk, which it has none of
// yet; dst gets its own host key at its first start.
func (d *Driver) ForkSnapshot(ctx context.Context, id string, dst *store.Sandbox) error {
	defer d.lock(dst.ID)()
	target := d.file(dst.ID, "disk.qcow2")
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	defer d.lock("snapshot " + id)()
	from := d.snapshotFile(id)
	if _, err := os.Stat(from); err != nil {
		return fmt.Errorf("qemu: the snapshot to fork: %w", err)
	}
	if err := os.MkdirAll(d.dir(dst.ID), 0o700); err != nil {
		return err
	}
	return copyDisk(ctx, from, target)
}

func (d *Driver) DeleteSnapshot(ctx context.Context, id string) error {
	defer d.lock("snapshot " + id)()
	if err := os.Remove(d.snapshotFile(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// fileBytes is the space a (sparse) file takes.
func fileBytes(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}
