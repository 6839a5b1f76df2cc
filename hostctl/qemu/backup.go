package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// backup copies a running VM's disk to the new file to without pausing
// it: the guest syncs its file systems, then a QMP backup job (drive-
// backup, sync top: the overlay's own clusters, the new file backed by
// the same base disk) copies the disk as it was when the job started —
// QEMU copies a cluster out before the guest overwrites it — while the
// guest runs on. The copy is the disk at one instant, as after a power
// cut with the guest's writes synced just before.
func (d *Driver) backup(ctx context.Context, id, job, to string) error {
	d.syncGuest(ctx, id)
	vm := d.attach(id)
	if vm == nil {
		return errors.New("the monitor does not answer")
	}
	defer vm.close()
	blocks, err := vm.api(ctx).QueryBlock()
	if err != nil {
		return err
	}
	disk, device := d.file(id, "disk.qcow2"), ""
	for _, b := range blocks {
		if b.Inserted != nil && b.Inserted.File == disk {
			device = b.Device
		}
	}
	if device == "" {
		return fmt.Errorf("no block device has %s", disk)
	}
	tmp := to + ".new"
	os.Remove(tmp)
	// drive-backup, query-jobs, job-dismiss and job-cancel as raw JSON:
	// go-qemu's generated DriveBackup has no auto-dismiss (the job must
	// stay until we have read its result), and its API has no job-*
	// commands nor query-jobs (only the older block-job ones, which lose a
	// failed job's error once it ends).
	err = vm.run(ctx, "drive-backup", map[string]any{"job-id": job, "device": device, "target": tmp, "sync": "top",
		"mode": "absolute-paths", "format": "qcow2", "auto-dismiss": false}, nil)
	if err == nil {
		err = vm.jobDone(ctx, job)
		if err != nil && ctx.Err() != nil {
			c := context.WithoutCancel(ctx)
			vm.run(c, "job-cancel", map[string]any{"id": job}, nil)
			vm.jobDone(c, job)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, to)
}

// jobDone waits until a block job (started with auto-dismiss false)
// concludes, dismisses it and returns its error.
func (m *monitor) jobDone(ctx context.Context, id string) error {
	for {
		var jobs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := m.run(ctx, "query-jobs", nil, &jobs); err != nil {
			return err
		}
		found := false
		for _, j := range jobs {
			if j.ID != id {
				continue
			}
			found = true
			if j.Status == "concluded" {
				if err := m.run(ctx, "job-dismiss", map[string]any{"id": id}, nil); err != nil {
					return err
				}
				if j.Error != "" {
					return fmt.Errorf("backup job: %s", j.Error)
				}
				return nil
			}
		}
		if !found {
			return fmt.Errorf("backup job %s is gone", id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
