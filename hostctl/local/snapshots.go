package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
)

var _ hostctl.Snapshotter = (*Driver)(nil)

// snapshot is the folder that holds snapshot id: a copy of a home folder.
// .snapshots is a name no sandbox id takes, so a sandbox's Delete leaves
// its saved snapshots.
func (d *Driver) snapshot(id string) string { return filepath.Join(d.o.Dir, ".snapshots", id) }

// Snapshot copies the sandbox's home folder. A running sandbox's
// processes are frozen (SIGSTOP) for the copy, so that none of them
// changes a file half-copied; this driver's own SSH server (and so SFTP
// writes) is not, which is fine for development.
func (d *Driver) Snapshot(ctx context.Context, sb *store.Sandbox, id string) (int64, error) {
	d.mu.Lock()
	b := d.boxes[sb.ID]
	frozen := b != nil && !b.paused
	if frozen {
		signalAll(sb.ID, syscall.SIGSTOP)
	}
	d.mu.Unlock()
	if frozen {
		defer signalAll(sb.ID, syscall.SIGCONT)
	}
	if _, err := os.Stat(d.Home(sb)); err != nil {
		return 0, fmt.Errorf("snapshot: the sandbox has no files yet: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(d.snapshot(id)), 0o700); err != nil {
		return 0, err
	}
	if err := copyTree(ctx, d.Home(sb), d.snapshot(id)); err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	return treeBytes(d.snapshot(id)), nil
}

// Restore replaces the home folder with the snapshot's copy; the sandbox
// must be stopped.
func (d *Driver) Restore(ctx context.Context, sb *store.Sandbox, id string) error {
	d.mu.Lock()
	_, running := d.boxes[sb.ID]
	d.mu.Unlock()
	if running {
		return errors.New("restore: the sandbox is running; stop it first")
	}
	if _, err := os.Stat(d.snapshot(id)); err != nil {
		return fmt.Errorf("restore: snapshot %s: %w", id, err)
	}
	home := d.Home(sb)
	if err := os.MkdirAll(d.dir(sb), 0o700); err != nil {
		return err
	}
	if err := copyTree(ctx, d.snapshot(id), home+".restore"); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	old := home + ".old"
	os.RemoveAll(old)
	if err := os.Rename(home, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(home+".restore", home); err != nil {
		os.Rename(old, home)
		return fmt.Errorf("restore: %w", err)
	}
	return os.RemoveAll(old)
}

// ForkSnapshot gives dst a copy of the snapshot as its home folder.
func (d *Driver) ForkSnapshot(ctx context.Context, id string, dst *store.Sandbox) error {
	if _, err := os.Stat(d.Home(dst)); err == nil {
		return nil
	}
	if err := os.MkdirAll(d.dir(dst), 0o700); err != nil {
		return err
	}
	if err := copyTree(ctx, d.snapshot(id), d.Home(dst)); err != nil {
		return fmt.Errorf("fork from snapshot %s: %w", id, err)
	}
	return nil
}

func (d *Driver) DeleteSnapshot(ctx context.Context, id string) error {
	return os.RemoveAll(d.snapshot(id))
}

// copyTree copies the folder from to the folder to (replacing what is
// there), under another name until it is whole.
func copyTree(ctx context.Context, from, to string) error {
	tmp := to + ".new"
	os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "cp", "-a", from, tmp).CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("copying %s: %v: %s", filepath.Base(from), err, out)
	}
	os.RemoveAll(to) // what an interrupted copy left
	return os.Rename(tmp, to)
}

// treeBytes is the size of the files under dir.
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
