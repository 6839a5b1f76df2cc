package storetest

import (
	"bytes"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func command(t *testing.T, s Backend, sandboxID, id, mode string, at time.Time) store.Command {
	t.Helper()
	c, err := s.CreateCommand(ctx, store.Command{ID: id, SandboxID: sandboxID, Command: "echo " + id, Mode: mode, Status: store.CommandRunning, StartedAt: at})
	if err != nil {
		t.Fatalf("CreateCommand %s: %v", id, err)
	}
	return c
}

func appendOut(s Backend, c store.Command, stream string, offset, size int64, data []byte, at time.Time) (store.Command, error) {
	return s.AppendOutput(ctx, c.SandboxID, c.ID, store.Output{Stream: stream, Offset: offset, Size: size, Gzip: data, At: at})
}

// testHistory: records, their order and cursor, updates, and that a
// sandbox's history survives a reopen and goes with the sandbox.
func testHistory(t *testing.T, o func() Backend) {
	s := o()
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "hist", nil, now)
	other := sandbox(t, s, a.ID, "other", nil, now)
	if _, err := s.CreateCommand(ctx, store.Command{ID: "cmd_x", SandboxID: "sb_none", Mode: store.ModeSync, Status: store.CommandRunning, StartedAt: now}); err == nil {
		t.Fatal("a record of no sandbox was made")
	}
	first := command(t, s, sb.ID, "cmd_0000000000000001", store.ModeSync, now)
	if first.AccountID != a.ID {
		t.Fatalf("got account %q, want the sandbox's %q", first.AccountID, a.ID)
	}
	command(t, s, sb.ID, "job_0000000000000002", store.ModeDetached, now.Add(time.Second))
	command(t, s, sb.ID, "cmd_0000000000000003", store.ModeStream, now.Add(time.Second))
	command(t, s, other.ID, "cmd_0000000000000004", store.ModeSync, now.Add(2*time.Second))
	_, err := s.CreateCommand(ctx, first)
	wantErr(t, "the same id twice", err, store.ErrConflict)

	ids := func(list []store.Command) []string {
		var out []string
		for _, c := range list {
			out = append(out, c.ID)
		}
		return out
	}
	list, err := s.Commands(ctx, store.CommandFilter{SandboxID: sb.ID})
	if got := ids(list); err != nil || len(got) != 3 || got[0] != "job_0000000000000002" || got[1] != "cmd_0000000000000003" || got[2] != first.ID {
		t.Fatalf("newest first: got %v, %v", got, err)
	}
	page, _ := s.Commands(ctx, store.CommandFilter{SandboxID: sb.ID, Limit: 1})
	rest, _ := s.Commands(ctx, store.CommandFilter{SandboxID: sb.ID, BeforeTime: page[0].StartedAt, BeforeID: page[0].ID})
	if got := ids(rest); len(page) != 1 || len(got) != 2 || got[0] != "cmd_0000000000000003" {
		t.Fatalf("after the cursor %s: got %v", page[0].ID, got)
	}
	if got, _ := s.Commands(ctx, store.CommandFilter{SandboxID: sb.ID, Mode: store.ModeDetached}); len(got) != 1 || got[0].Mode != store.ModeDetached {
		t.Fatalf("mode detached: got %v", ids(got))
	}

	end := now.Add(3 * time.Second)
	code := 7
	c, err := s.UpdateCommand(ctx, sb.ID, first.ID, func(c *store.Command) error {
		c.Status, c.ExitCode, c.EndedAt = store.CommandExited, &code, &end
		c.StdoutSize, c.Command = 99, "changed" // not fn's to change
		return nil
	})
	if err != nil || c.Status != store.CommandExited || *c.ExitCode != 7 || !c.EndedAt.Equal(end) || c.StdoutSize != 0 || c.Command != "echo "+first.ID {
		t.Fatalf("UpdateCommand: got %+v, %v", c, err)
	}
	_, err = s.UpdateCommand(ctx, other.ID, first.ID, func(*store.Command) error { return nil })
	wantErr(t, "another sandbox's record", err, store.ErrNotFound)
	live, err := s.OpenCommands(ctx)
	if err != nil || len(live) != 3 || live[0].ID != "cmd_0000000000000003" || live[2].ID != "cmd_0000000000000004" {
		t.Fatalf("OpenCommands, oldest first: got %v, %v", ids(live), err)
	}
	if got, _ := s.Commands(ctx, store.CommandFilter{SandboxID: sb.ID, Open: true}); len(got) != 2 || got[0].ID != "job_0000000000000002" || got[1].ID != "cmd_0000000000000003" {
		t.Fatalf("open only, with %s ended: got %v", first.ID, ids(got))
	}
	if _, err := appendOut(s, c, store.Stdout, 0, 3, []byte("gz1"), now); err != nil {
		t.Fatal(err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o)
	got, err := s.Command(ctx, sb.ID, first.ID)
	if err != nil || got.Status != store.CommandExited || got.StdoutSize != 3 {
		t.Fatalf("after reopen: got %+v, %v", got, err)
	}
	if out, err := s.ReadOutput(ctx, sb.ID, first.ID, store.Stdout, 0, 10); err != nil || len(out) != 1 || string(out[0].Gzip) != "gz1" {
		t.Fatalf("output after reopen: got %v, %v", out, err)
	}

	if err := s.DeleteSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Command(ctx, sb.ID, first.ID)
	wantErr(t, "a deleted sandbox's record", err, store.ErrNotFound)
	_, err = s.ReadOutput(ctx, sb.ID, first.ID, store.Stdout, 0, 10)
	wantErr(t, "a deleted sandbox's output", err, store.ErrNotFound)
	if list, _ := s.Commands(ctx, store.CommandFilter{SandboxID: sb.ID}); len(list) != 0 {
		t.Fatalf("a deleted sandbox's history: got %v", ids(list))
	}
	_, err = s.CreateCommand(ctx, store.Command{ID: "cmd_0000000000000009", SandboxID: sb.ID, Mode: store.ModeSync, Status: store.CommandRunning, StartedAt: now})
	wantErr(t, "a record of a deleted sandbox", err, store.ErrNotFound)
	if list, _ := s.Commands(ctx, store.CommandFilter{SandboxID: other.ID}); len(list) != 1 {
		t.Fatalf("the other sandbox's history: got %v", ids(list))
	}
}

// testHistoryOutput: chunks append at the end of their stream, are read
// back by range, and the caps (per stream by mode, per account an hour)
// drop output and mark the record truncated.
func testHistoryOutput(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "out", nil, now)
	c := command(t, s, sb.ID, "cmd_00000000000000a1", store.ModeSync, now)

	c, err := appendOut(s, c, store.Stdout, 0, 10, []byte("first"), now)
	if err != nil || c.StdoutSize != 10 || c.StoredBytes != 5 {
		t.Fatalf("first chunk: got %+v, %v", c, err)
	}
	_, err = appendOut(s, c, store.Stdout, 5, 10, []byte("again"), now)
	wantErr(t, "a chunk that does not start at the end", err, store.ErrConflict)
	if c, err = appendOut(s, c, store.Stdout, 10, 10, []byte("second"), now); err != nil || c.StdoutSize != 20 {
		t.Fatalf("second chunk: got %+v, %v", c, err)
	}
	if c, err = appendOut(s, c, store.Stderr, 0, 4, []byte("err"), now); err != nil || c.StderrSize != 4 || c.StdoutSize != 20 {
		t.Fatalf("stderr: got %+v, %v", c, err)
	}
	read := func(stream string, offset, n int64) string {
		t.Helper()
		out, err := s.ReadOutput(ctx, sb.ID, c.ID, stream, offset, n)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, ch := range out {
			b.Write(ch.Gzip)
		}
		return b.String()
	}
	for _, tt := range []struct {
		stream    string
		offset, n int64
		want      string
	}{
		{store.Stdout, 0, 100, "firstsecond"},
		{store.Stdout, 9, 2, "firstsecond"},
		{store.Stdout, 10, 100, "second"},
		{store.Stdout, 0, 10, "first"},
		{store.Stdout, 20, 100, ""},
		{store.Stderr, 0, 1, "err"},
	} {
		if got := read(tt.stream, tt.offset, tt.n); got != tt.want {
			t.Errorf("%s from %d, %d bytes: got chunks %q, want %q", tt.stream, tt.offset, tt.n, got, tt.want)
		}
	}
	_, err = s.AppendOutput(ctx, sb.ID, c.ID, store.Output{Stream: "both", Size: 1, Gzip: []byte("x"), At: now})
	if err == nil {
		t.Fatal("a stream that is neither stdout nor stderr was stored")
	}

	// A waiting command keeps 1 MiB a stream: a chunk past it is dropped.
	c, err = appendOut(s, c, store.Stdout, 20, store.MaxWaitingOutput, []byte("big"), now)
	if err != nil || c.StdoutSize != 20 || !c.OutputTruncated {
		t.Fatalf("past 1 MiB: got %+v, %v", c, err)
	}
	// Once truncated, nothing more is kept, on either stream.
	if c, err = appendOut(s, c, store.Stderr, 4, 1, []byte("e"), now); err != nil || c.StderrSize != 4 {
		t.Fatalf("after truncation: got %+v, %v", c, err)
	}
	// A caller that cut the output itself says so.
	d := command(t, s, sb.ID, "job_00000000000000a2", store.ModeDetached, now)
	if d.Room(store.Stdout) != store.MaxDetachedOutput {
		t.Fatalf("a background command's room: got %d, want 8 MiB", d.Room(store.Stdout))
	}
	d, err = s.AppendOutput(ctx, sb.ID, d.ID, store.Output{Stream: store.Stdout, Size: 2, Gzip: []byte("ok"), At: now, Truncated: true})
	if err != nil || d.StdoutSize != 2 || !d.OutputTruncated {
		t.Fatalf("a chunk cut by its caller: got %+v, %v", d, err)
	}

	// The account stores 10 MiB compressed an hour, over every sandbox.
	other := sandbox(t, s, a.ID, "out2", nil, now)
	big := bytes.Repeat([]byte{1}, store.MaxOutputPerHour/2)
	hour := now.Truncate(time.Hour).Add(2*time.Hour + 10*time.Minute) // no output in it yet
	e := command(t, s, other.ID, "job_00000000000000a3", store.ModeDetached, now)
	f := command(t, s, sb.ID, "job_00000000000000a4", store.ModeDetached, now)
	if e, err = appendOut(s, e, store.Stdout, 0, 100, big, hour); err != nil || e.OutputTruncated {
		t.Fatalf("5 MiB: got %+v, %v", e, err)
	}
	if f, err = appendOut(s, f, store.Stdout, 0, 100, big[:len(big)-2], hour.Add(time.Minute)); err != nil || f.OutputTruncated {
		t.Fatalf("10 MiB less 2 bytes: got %+v, %v", f, err)
	}
	if e, err = appendOut(s, e, store.Stdout, 100, 1, []byte("abc"), hour.Add(2*time.Minute)); err != nil || !e.OutputTruncated || e.StdoutSize != 100 {
		t.Fatalf("past 10 MiB in the hour: got %+v, %v", e, err)
	}
	if f, err = appendOut(s, f, store.Stdout, 100, 1, []byte("ab"), hour.Add(3*time.Minute)); err != nil || f.OutputTruncated || f.StdoutSize != 101 {
		t.Fatalf("up to 10 MiB exactly: got %+v, %v", f, err)
	}
	if f, err = appendOut(s, f, store.Stdout, 101, 1, []byte("x"), hour.Add(time.Hour)); err != nil || f.OutputTruncated || f.StdoutSize != 102 {
		t.Fatalf("the next hour: got %+v, %v", f, err)
	}
	b := account(t, s, 10)
	g := command(t, s, sandbox(t, s, b.ID, "theirs", nil, now).ID, "cmd_00000000000000a5", store.ModeSync, now)
	if g, err = appendOut(s, g, store.Stdout, 0, 1, []byte("x"), hour.Add(4*time.Minute)); err != nil || g.OutputTruncated {
		t.Fatalf("another account in the same hour: got %+v, %v", g, err)
	}
}

// testHistoryPrune: records of commands that ended more than the time
// kept ago go, with their output; running ones and recent ones stay.
func testHistoryPrune(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "prune", nil, now)
	long := now.Add(-store.HistoryKept - time.Hour)
	end := func(c store.Command, at time.Time) {
		t.Helper()
		if _, err := s.UpdateCommand(ctx, sb.ID, c.ID, func(c *store.Command) error {
			c.Status, c.EndedAt = store.CommandExited, &at
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	old := command(t, s, sb.ID, "cmd_00000000000000b1", store.ModeSync, long.Add(-time.Minute))
	if _, err := appendOut(s, old, store.Stdout, 0, 3, []byte("old"), long); err != nil {
		t.Fatal(err)
	}
	end(old, long)
	recent := command(t, s, sb.ID, "cmd_00000000000000b2", store.ModeSync, long)
	end(recent, now)
	command(t, s, sb.ID, "job_00000000000000b3", store.ModeDetached, long.Add(-time.Hour)) // still running

	n, err := s.PruneHistory(ctx, now.Add(-store.HistoryKept))
	if err != nil || n != 1 {
		t.Fatalf("PruneHistory: %d, %v; want 1", n, err)
	}
	_, err = s.Command(ctx, sb.ID, old.ID)
	wantErr(t, "a pruned record", err, store.ErrNotFound)
	_, err = s.ReadOutput(ctx, sb.ID, old.ID, store.Stdout, 0, 10)
	wantErr(t, "a pruned record's output", err, store.ErrNotFound)
	list, err := s.Commands(ctx, store.CommandFilter{SandboxID: sb.ID})
	if err != nil || len(list) != 2 {
		t.Fatalf("after the prune: %+v, %v", list, err)
	}
	if n, err := s.PruneHistory(ctx, now.Add(-store.HistoryKept)); err != nil || n != 0 {
		t.Fatalf("a second prune: %d, %v", n, err)
	}
}
