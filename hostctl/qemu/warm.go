package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/digitalocean/go-qemu/qmp/raw"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
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
	kvm, err := vm.api(ctx).QueryKVM()
	if err != nil {
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
	err = vm.api(ctx).Migrate("exec:cat > "+shellQuote(tmp), nil, nil, nil)
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
		hostctl.ReportProgress(ctx, "restoring its memory")
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
	if err := vm.api(ctx).MigrateIncoming("exec:cat " + shellQuote(d.file(id, memoryFile))); err != nil {
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
			return vm.api(ctx).Cont()
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
		st, err := m.api(ctx).QueryMigrate()
		if err != nil {
			return err
		}
		if st.Status != nil {
			switch *st.Status {
			case raw.MigrationStatusCompleted:
				return nil
			case raw.MigrationStatusFailed, raw.MigrationStatusCancelled:
				desc := ""
				if st.ErrorDesc != nil {
					desc = *st.ErrorDesc
				}
				return fmt.Errorf("migration %s: %s", *st.Status, desc)
			}
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
