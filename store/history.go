package store

import (
	"context"
	"fmt"
	"time"
)

// Command history (docs: Command history). Every exec and background
// command gets a record on the store: its text, mode, status, exit code,
// times, and its output, compressed (gzip), in chunks appended as it is
// copied. A chunk is never rewritten: a background command's output is
// copied every 30 s, and appending keeps that cheap on both stores. The
// caps every implementation applies live here (AcceptOutput), so that
// they agree. A sandbox's history goes with it (DeleteSandbox).

// Modes of a command.
const (
	ModeSync     = "sync"
	ModeStream   = "stream"
	ModeDetached = "detached"
)

// Statuses of a command.
const (
	CommandRunning  = "running"
	CommandPaused   = "paused"
	CommandExited   = "exited"
	CommandTimedOut = "timed_out"
	CommandFailed   = "failed"
	CommandKilled   = "killed"
	CommandLost     = "lost"
)

// Output streams.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Bounds of the history (docs: Command history).
const (
	// MaxCommandText is how much of a command's text is kept.
	MaxCommandText = 64 << 10
	// MaxWaitingOutput bounds each stream of a command the caller waits
	// for (sync, stream): the same as its answer.
	MaxWaitingOutput = 1 << 20
	// MaxDetachedOutput bounds a background command's output (stdout
	// and stderr together, under stdout).
	MaxDetachedOutput = 8 << 20
	// MaxOutputPerHour bounds the compressed output an account stores in
	// one clock hour (UTC).
	MaxOutputPerHour = 10 << 20
	// MaxStoredPerAccount bounds the compressed output an account keeps
	// in all (docs: Limits, 512 MiB): past it, new output is dropped
	// until records go (deleted with their sandbox, or after
	// HistoryKept).
	MaxStoredPerAccount = 512 << 20
	// HistoryKept is how long a record is kept after its command ended.
	HistoryKept = 90 * 24 * time.Hour
)

// Command is one command's record.
type Command struct {
	ID        string `json:"id"` // cmd_… for exec, the job's id (job_…) for a background command
	AccountID string `json:"account_id"`
	SandboxID string `json:"sandbox_id"`
	Command   string `json:"command"` // its first MaxCommandText bytes
	Mode      string `json:"mode"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	// StartedAt orders the history (newest first).
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// StdoutSize and StderrSize are the bytes stored of each stream,
	// uncompressed; StoredBytes their compressed size.
	StdoutSize  int64 `json:"stdout_size"`
	StderrSize  int64 `json:"stderr_size"`
	StoredBytes int64 `json:"stored_bytes"`
	// OutputTruncated: output past a cap was dropped. Nothing more is
	// stored once it is set, so what is stored is the output's start.
	OutputTruncated bool `json:"output_truncated,omitempty"`
}

// Open reports whether c may still change: running or paused.
func (c *Command) Open() bool { return c.Status == CommandRunning || c.Status == CommandPaused }

// Size is how many bytes of stream are stored.
func (c *Command) Size(stream string) int64 {
	if stream == Stderr {
		return c.StderrSize
	}
	return c.StdoutSize
}

// Room is how many more bytes of stream c may store (its mode's cap);
// 0 once its output was truncated.
func (c *Command) Room(stream string) int64 {
	if c.OutputTruncated {
		return 0
	}
	limit := int64(MaxWaitingOutput)
	if c.Mode == ModeDetached {
		limit = MaxDetachedOutput
	}
	return max(0, limit-c.Size(stream))
}

// Output is one chunk of a command's stream: Size bytes from Offset,
// gzip-compressed in Gzip.
type Output struct {
	Stream string    `json:"stream"`
	Offset int64     `json:"offset"`
	Size   int64     `json:"size"`
	Gzip   []byte    `json:"gzip"`
	At     time.Time `json:"at"`
	// Truncated: the caller dropped bytes after these (Room): the record
	// shows output_truncated. Not stored with the chunk.
	Truncated bool `json:"-"`
}

// OutputHour is the clock hour whose cap a chunk written at at counts
// against.
func OutputHour(at time.Time) time.Time { return at.UTC().Truncate(time.Hour) }

// OutputUse is what an account has stored, compressed: in one hour, and
// in all (its records' StoredBytes).
type OutputUse struct{ Hour, Total int64 }

// AcceptOutput decides whether out is stored on c, given the compressed
// bytes c's account has stored (use), and updates c. It
// returns ErrConflict when out does not start where c's stream ends (a
// copy of the same output by another process came first), and false
// when out is dropped: past a cap (c then shows output_truncated), or
// empty.
func AcceptOutput(c *Command, out *Output, use OutputUse) (bool, error) {
	if out.Stream != Stdout && out.Stream != Stderr {
		return false, fmt.Errorf("output stream %q: want stdout or stderr", out.Stream)
	}
	if out.Offset != c.Size(out.Stream) {
		return false, fmt.Errorf("output of %s at %d, stored up to %d: %w", c.ID, out.Offset, c.Size(out.Stream), ErrConflict)
	}
	n := int64(len(out.Gzip))
	keep := out.Size > 0 && out.Size <= c.Room(out.Stream) && use.Hour+n <= MaxOutputPerHour && use.Total+n <= MaxStoredPerAccount
	if out.Truncated || (out.Size > 0 && !keep) {
		c.OutputTruncated = true
	}
	if !keep {
		return false, nil
	}
	if out.Stream == Stderr {
		c.StderrSize += out.Size
	} else {
		c.StdoutSize += out.Size
	}
	c.StoredBytes += int64(len(out.Gzip))
	return true, nil
}

// ChangeCommand applies fn to a copy of old and returns it with what is
// not fn's to change (ids, mode, text, start, sizes) as it was, and its
// end time to the microsecond: UpdateCommand in both implementations.
func ChangeCommand(old Command, fn func(*Command) error) (Command, error) {
	c := old
	if err := fn(&c); err != nil {
		return Command{}, err
	}
	c.ID, c.AccountID, c.SandboxID, c.Command, c.Mode, c.StartedAt = old.ID, old.AccountID, old.SandboxID, old.Command, old.Mode, old.StartedAt
	c.StdoutSize, c.StderrSize, c.StoredBytes = old.StdoutSize, old.StderrSize, old.StoredBytes
	c.OutputTruncated = c.OutputTruncated || old.OutputTruncated
	if c.EndedAt != nil {
		t := Micro(*c.EndedAt)
		c.EndedAt = &t
	}
	return c, nil
}

// CommandFilter selects a sandbox's records, newest first.
type CommandFilter struct {
	SandboxID string
	Mode      string // "": every mode
	Open      bool   // only the records that may still change (Open)
	// Before is a cursor: only records before (StartedAt, ID) in the
	// order newest first.
	BeforeTime time.Time
	BeforeID   string
	Limit      int // 0: no limit
}

// Match reports whether c passes the filter (limit aside); both
// implementations use it.
func (f CommandFilter) Match(c *Command) bool {
	if c.SandboxID != f.SandboxID || (f.Mode != "" && c.Mode != f.Mode) || (f.Open && !c.Open()) {
		return false
	}
	if !f.BeforeTime.IsZero() {
		if c.StartedAt.After(f.BeforeTime) || (c.StartedAt.Equal(f.BeforeTime) && c.ID >= f.BeforeID) {
			return false
		}
	}
	return true
}

// NewerCommand orders records newest first: by StartedAt, then ID, both
// descending.
func NewerCommand(a, b *Command) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	switch {
	case a.ID > b.ID:
		return -1
	case a.ID < b.ID:
		return 1
	}
	return 0
}

// History is the command history's part of the Store.
type History interface {
	// CreateCommand records a command: ErrNotFound without its sandbox
	// (or a deleted one), ErrConflict when the sandbox has that id.
	CreateCommand(ctx context.Context, c Command) (Command, error)
	// Command reads a record of the sandbox; ErrNotFound when none.
	Command(ctx context.Context, sandboxID, id string) (Command, error)
	// Commands lists records as f says, newest first.
	Commands(ctx context.Context, f CommandFilter) ([]Command, error)
	// OpenCommands lists the records of every account that are running
	// or paused, oldest first: the copier's work.
	OpenCommands(ctx context.Context) ([]Command, error)
	// UpdateCommand reads the record, applies fn (status, exit code,
	// end) and writes it; sizes and output stay the store's.
	UpdateCommand(ctx context.Context, sandboxID, id string, fn func(*Command) error) (Command, error)
	// AppendOutput adds a chunk at the end of one of the record's
	// streams, as AcceptOutput decides against the account's use, and
	// returns the record.
	AppendOutput(ctx context.Context, sandboxID, id string, out Output) (Command, error)
	// ReadOutput lists the chunks of the record's stream that hold bytes
	// from offset to offset+n, in order.
	ReadOutput(ctx context.Context, sandboxID, id, stream string, offset, n int64) ([]Output, error)
	// PruneHistory removes the records (and their output) of commands
	// that ended before before, and the hour counts older than a day
	// before it; it returns how many records went.
	PruneHistory(ctx context.Context, before time.Time) (int, error)
}

// Prunable reports whether PruneHistory removes c: it ended before
// before.
func (c *Command) Prunable(before time.Time) bool {
	return !c.Open() && c.EndedAt != nil && c.EndedAt.Before(before)
}
