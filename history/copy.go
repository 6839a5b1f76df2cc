// Package history copies background commands' output from a sandbox's
// disk into its command history on the store (store/history.go: the
// records, their caps). A background command (a job, package sandboxio)
// writes its output on the sandbox's own disk; the API copies it every
// 30 s, when a job is read or stopped, and hostctl copies it once more
// before a running sandbox stops (the docs: copied every 30 s and at
// stop). Any number of copiers may copy one job: the store takes each
// byte once (store.AcceptOutput).
package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"time"

	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
)

// Store is what a Copier needs of the store.
type Store interface {
	Command(ctx context.Context, sandboxID, id string) (store.Command, error)
	Commands(ctx context.Context, f store.CommandFilter) ([]store.Command, error)
	AppendOutput(ctx context.Context, sandboxID, id string, out store.Output) (store.Command, error)
	UpdateCommand(ctx context.Context, sandboxID, id string, fn func(*store.Command) error) (store.Command, error)
}

// Jobs reads a job's output and state from its sandbox (sandboxio.Shell).
type Jobs interface {
	JobOutput(ctx context.Context, sandboxID, id string, offset int64) (sandboxio.Job, []byte, error)
}

// Copier copies jobs' output into their records.
type Copier struct {
	Store Store
	Jobs  Jobs
	Now   func() time.Time // nil means time.Now
}

func (cp *Copier) now() time.Time {
	if cp.Now == nil {
		return time.Now()
	}
	return cp.Now()
}

// Gzip compresses b as the history stores output.
func Gzip(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// jobStatus is a job's state as a record's status.
func jobStatus(state string) string {
	switch state {
	case "running", "exited", "killed", "lost":
		return state
	}
	return store.CommandLost
}

// Keep stores what record c lacks of data (job j's output from offset,
// as a read of it gave it), then j's state once everything it has is
// stored. It returns the record as it is then.
func (cp *Copier) Keep(ctx context.Context, c store.Command, j sandboxio.Job, offset int64, data []byte) (store.Command, error) {
	if !c.Open() {
		return c, nil // final: a later read changes nothing
	}
	if from := c.StdoutSize - offset; from >= 0 && from < int64(len(data)) && c.Room(store.Stdout) > 0 {
		part := data[from:]
		out := store.Output{Stream: store.Stdout, Offset: c.StdoutSize, At: cp.now()}
		if room := c.Room(store.Stdout); int64(len(part)) > room {
			part, out.Truncated = part[:room], true
		}
		out.Size, out.Gzip = int64(len(part)), Gzip(part)
		got, err := cp.Store.AppendOutput(ctx, c.SandboxID, c.ID, out)
		if errors.Is(err, store.ErrConflict) {
			got, err = cp.Store.Command(ctx, c.SandboxID, c.ID) // another copy came first
		}
		if err != nil {
			return c, err
		}
		c = got
	}
	status := jobStatus(j.State)
	complete := c.StdoutSize >= j.OutputSize || c.Room(store.Stdout) == 0
	if status == c.Status || (status != store.CommandRunning && !complete) {
		return c, nil
	}
	end := cp.now()
	return cp.Store.UpdateCommand(ctx, c.SandboxID, c.ID, func(c *store.Command) error {
		c.Status, c.ExitCode, c.EndedAt = status, j.ExitCode, nil
		if status != store.CommandRunning {
			c.EndedAt = &end
		}
		return nil
	})
}

// Copy copies job c's output past what is stored, and its state, from
// running sandbox sandboxID.
func (cp *Copier) Copy(ctx context.Context, sandboxID string, c store.Command) error {
	for c.Open() {
		offset := c.StdoutSize
		j, data, err := cp.Jobs.JobOutput(ctx, sandboxID, c.ID, offset)
		if errors.Is(err, sandboxio.ErrNoJob) {
			j, err = sandboxio.Job{ID: c.ID, State: "lost"}, nil // its folder is gone
		}
		if err != nil {
			return err
		}
		if c, err = cp.Keep(ctx, c, j, offset, data); err != nil {
			return err
		}
		if len(data) < sandboxio.MaxJobChunk || c.StdoutSize == offset {
			return nil
		}
	}
	return nil
}

// CopyOpen copies every background command of running sandbox sb that
// is still open, before it stops; nothing with monitoring off. It goes
// on past a command that fails and returns the first error.
func (cp *Copier) CopyOpen(ctx context.Context, sb *store.Sandbox) error {
	if sb.NoMonitoring {
		return nil
	}
	list, err := cp.Store.Commands(ctx, store.CommandFilter{SandboxID: sb.ID, Mode: store.ModeDetached, Open: true})
	if err != nil {
		return err
	}
	var first error
	for _, c := range list {
		if err := cp.Copy(ctx, sb.ID, c); err != nil && first == nil {
			first = err
		}
	}
	return first
}
