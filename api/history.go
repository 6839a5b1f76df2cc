package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"froog.tech/froog/history"
	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
)

// The command history (docs: Command history): every exec and background
// command gets a record on the store, written here as it starts and ends
// (exec.go, jobs.go), and read by the command-history routes, also while
// the sandbox is stopped. Output is stored gzip-compressed. A waiting
// command's output is stored when it returns; a background command's is
// copied from the sandbox's disk (package history) every
// historyCopyEvery (CopyHistory) and when the job is read or stopped
// through the API, and by hostctl before the sandbox stops. The store
// applies the caps (store.AcceptOutput).

const (
	// historyCopyEvery is how often background commands' output is copied.
	historyCopyEvery = 30 * time.Second
	// maxLogRead bounds one read of a record's output.
	maxLogRead = 1 << 20
	// historyWrite bounds the store writes that end a command, which
	// run on after a client hangs up.
	historyWrite = 30 * time.Second
	// orphanedAfter is when an exec's record still running is taken for
	// lost: past the longest timeout, with room for its output's writes.
	orphanedAfter = maxExecTimeout*time.Second + 10*time.Minute
)

var historyID = regexp.MustCompile(`^(cmd|job)_[0-9a-f]{16}$`)

// monitoringOff refuses a reading of sb's history or numbers when it
// was made with monitoring: false (nothing is kept, nothing is read).
func monitoringOff(sb *store.Sandbox) error {
	if sb.NoMonitoring {
		return errorf(http.StatusConflict, "monitoring_off", "sandbox %q was made with monitoring off: no command history or numbers are kept or read", sb.Name)
	}
	return nil
}

// recordCommand records a command that starts in sb; nothing when sb
// has monitoring off.
func (s *Server) recordCommand(ctx context.Context, sb *store.Sandbox, id, mode, command string) error {
	if sb.NoMonitoring {
		return nil
	}
	if len(command) > store.MaxCommandText {
		command = strings.ToValidUTF8(command[:store.MaxCommandText], "")
	}
	_, err := s.store.CreateCommand(ctx, store.Command{ID: id, SandboxID: sb.ID, Command: command, Mode: mode, Status: store.CommandRunning, StartedAt: s.now()})
	return err
}

// finishCommand stores a waiting command's output and how it ended:
// res and err are the run's, hungUp whether its client went away.
func (s *Server) finishCommand(ctx context.Context, sb *store.Sandbox, id string, stdout, stderr *sandboxio.Capped, res sandboxio.Result, err error, hungUp bool) {
	if sb.NoMonitoring {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyWrite)
	defer cancel()
	status, code := store.CommandExited, &res.Code
	switch {
	case err == nil && res.TimedOut:
		status = store.CommandTimedOut
	case err == nil:
	case hungUp:
		status, code = store.CommandKilled, nil
	case errors.Is(err, errLost):
		status, code = store.CommandLost, nil
	default:
		status, code = store.CommandFailed, nil
	}
	for _, o := range []struct {
		stream string
		c      *sandboxio.Capped
	}{{store.Stdout, stdout}, {store.Stderr, stderr}} {
		b := o.c.Bytes()
		if len(b) == 0 && !o.c.Dropped {
			continue
		}
		out := store.Output{Stream: o.stream, Size: int64(len(b)), Gzip: history.Gzip(b), At: s.now(), Truncated: o.c.Dropped}
		if _, err := s.store.AppendOutput(ctx, sb.ID, id, out); err != nil {
			s.historyFailed(ctx, sb, id, err)
		}
	}
	end := s.now()
	_, err = s.store.UpdateCommand(ctx, sb.ID, id, func(c *store.Command) error {
		c.Status, c.ExitCode, c.EndedAt = status, code, &end
		return nil
	})
	if err != nil {
		s.historyFailed(ctx, sb, id, err)
	}
}

// historyFailed logs a history write that failed: the command itself
// went on, so it is the log's, not the client's.
func (s *Server) historyFailed(ctx context.Context, sb *store.Sandbox, id string, err error) {
	s.log.LogAttrs(ctx, slog.LevelWarn, "command history not written",
		slog.String("sandbox", sb.ID), slog.String("command", id), slog.String("error", err.Error()))
}

// CopyHistory copies, once, the output and state of every background
// command still running in the history, and settles the records of
// sandboxes that stopped under their commands: paused while a stopped
// sandbox is warm, lost otherwise. Any API process may run it: two
// copies of one output store it once (store.AcceptOutput).
func (s *Server) CopyHistory(ctx context.Context) error {
	list, err := s.store.OpenCommands(ctx)
	if err != nil {
		return fmt.Errorf("list running commands: %w", err)
	}
	sandboxes := map[string]*store.Sandbox{}
	for _, c := range list {
		sb, ok := sandboxes[c.SandboxID]
		if !ok {
			got, err := s.store.SandboxByID(ctx, c.SandboxID)
			if err != nil {
				continue // deleted: its history is gone with it
			}
			sb, sandboxes[c.SandboxID] = &got, &got
		}
		if err := s.settleCommand(ctx, sb, c); err != nil {
			s.historyFailed(ctx, sb, c.ID, err)
		}
	}
	return nil
}

// settleCommand brings open record c up to date with its sandbox sb.
func (s *Server) settleCommand(ctx context.Context, sb *store.Sandbox, c store.Command) error {
	switch sb.State {
	case store.StateRunning:
		if c.Mode != store.ModeDetached {
			// A waiting command's own request ends it, within its timeout;
			// one still open well past the longest is an API process's
			// that died under it.
			if s.now().Sub(c.StartedAt) < orphanedAfter {
				return nil
			}
			return s.endCommand(ctx, &c, store.CommandLost)
		}
		if s.jobs == nil {
			return nil
		}
		return s.copier().Copy(ctx, sb.ID, c)
	case store.StateStopped, store.StateError:
		status := store.CommandLost
		if c.Mode == store.ModeDetached && sb.State == store.StateStopped && sb.WarmUntil != nil && sb.WarmUntil.After(s.now()) {
			status = store.CommandPaused
		}
		if status == c.Status {
			return nil
		}
		return s.endCommand(ctx, &c, status)
	}
	return nil // starting or stopping: the next pass sees where it went
}

// endCommand sets c's status as the copier found it: lost ends it now,
// paused leaves it open.
func (s *Server) endCommand(ctx context.Context, c *store.Command, status string) error {
	end := s.now()
	_, err := s.store.UpdateCommand(ctx, c.SandboxID, c.ID, func(c *store.Command) error {
		c.Status, c.EndedAt = status, nil
		if status == store.CommandLost {
			c.EndedAt = &end
		}
		return nil
	})
	return err
}

// historyLease is held by the one API process whose copier copies: the
// others would read every running job over SSH again for nothing. It
// outlasts two rounds, renewed at each; when its holder goes, another
// copier takes it within historyLeaseTTL.
const (
	historyLease    = "history-copier"
	historyLeaseTTL = 2*historyCopyEvery + historyCopyEvery/2
)

// RunHistoryCopier runs CopyHistory every 30 s until ctx ends, and
// once an hour forgets the records past store.HistoryKept, in one API
// process at a time (historyLease).
func (s *Server) RunHistoryCopier(ctx context.Context) error {
	owner := store.NewID("copier")
	defer s.store.ReleaseLease(context.WithoutCancel(ctx), historyLease, owner)
	t := time.NewTicker(historyCopyEvery)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		copied, err := s.copyRound(ctx, owner)
		if now := s.now(); copied && err == nil && now.Sub(pruned) >= time.Hour {
			pruned = now
			_, err = s.store.PruneHistory(ctx, now.Add(-store.HistoryKept))
		}
		if err != nil && ctx.Err() == nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "command history upkeep failed", slog.String("error", err.Error()))
		}
	}
}

// copyRound is one round of owner's copier: CopyHistory if it holds
// historyLease (taking or renewing it), else nothing.
func (s *Server) copyRound(ctx context.Context, owner string) (bool, error) {
	ok, err := s.store.AcquireLease(ctx, historyLease, owner, historyLeaseTTL)
	if err != nil || !ok {
		return false, err
	}
	return true, s.CopyHistory(ctx)
}

// copier copies background commands' output into the history.
func (s *Server) copier() *history.Copier {
	return &history.Copier{Store: s.store, Jobs: s.jobs, Now: s.now}
}

// jobRead keeps what a read of job j (data from offset) adds to its
// record; the read's answer does not wait on it failing.
func (s *Server) jobRead(ctx context.Context, sb *store.Sandbox, j sandboxio.Job, offset int64, data []byte) {
	c, err := s.store.Command(ctx, sb.ID, j.ID)
	if errors.Is(err, store.ErrNotFound) {
		return // started before the history was kept
	}
	if err == nil {
		_, err = s.copier().Keep(ctx, c, j, offset, data)
	}
	if err != nil {
		s.historyFailed(ctx, sb, j.ID, err)
	}
}

// --- the routes ---

type commandView struct {
	ID              string     `json:"id"`
	Sandbox         string     `json:"sandbox"`
	Command         string     `json:"command"`
	Mode            string     `json:"mode"`
	Status          string     `json:"status"`
	ExitCode        *int       `json:"exit_code"`
	StartedAt       time.Time  `json:"started_at"`
	EndedAt         *time.Time `json:"ended_at"`
	StdoutSize      int64      `json:"stdout_size"`
	StderrSize      int64      `json:"stderr_size"`
	OutputTruncated bool       `json:"output_truncated"`
}

func viewCommand(sb *store.Sandbox, c *store.Command) commandView {
	return commandView{ID: c.ID, Sandbox: sb.Name, Command: c.Command, Mode: c.Mode, Status: c.Status, ExitCode: c.ExitCode,
		StartedAt: c.StartedAt, EndedAt: c.EndedAt, StdoutSize: c.StdoutSize, StderrSize: c.StderrSize, OutputTruncated: c.OutputTruncated}
}

var modes = []string{store.ModeSync, store.ModeStream, store.ModeDetached}

func (s *Server) listHistory(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "mode", "limit", "cursor"); err != nil {
		return err
	}
	f := store.CommandFilter{Mode: q.Get("mode")}
	if f.Mode != "" && !slices.Contains(modes, f.Mode) {
		return badRequest("invalid_query", "mode must be among %s", strings.Join(modes, ", "))
	}
	limit, err := queryLimit(q, 50)
	if err != nil {
		return err
	}
	f.Limit = limit
	if c := q.Get("cursor"); c != "" {
		ts, id, ok := strings.Cut(c, "_")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil || !historyID.MatchString(id) {
			return badRequest("invalid_query", "cursor is not one this API gave out")
		}
		f.BeforeTime, f.BeforeID = t, id
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if err := monitoringOff(sb); err != nil {
		return err
	}
	f.SandboxID = sb.ID
	list, err := s.store.Commands(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Commands   []commandView `json:"commands"`
		NextCursor *string       `json:"next_cursor"`
	}{Commands: []commandView{}}
	for i := range list {
		out.Commands = append(out.Commands, viewCommand(sb, &list[i]))
	}
	if len(list) == limit {
		last := list[len(list)-1]
		c := last.StartedAt.UTC().Format(time.RFC3339Nano) + "_" + last.ID
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// historyRecord finds the path's sandbox and its record.
func (s *Server) historyRecord(r *http.Request) (*store.Sandbox, store.Command, error) {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return nil, store.Command{}, err
	}
	if err := monitoringOff(sb); err != nil {
		return nil, store.Command{}, err
	}
	id := r.PathValue("id")
	if !historyID.MatchString(id) {
		return nil, store.Command{}, errorf(http.StatusNotFound, "not_found", "no such command in the history")
	}
	c, err := s.store.Command(r.Context(), sb.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Command{}, errorf(http.StatusNotFound, "not_found", "no such command in the history")
	}
	return sb, c, err
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	sb, c, err := s.historyRecord(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewCommand(sb, &c))
	return nil
}

func (s *Server) historyLogs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "stream", "offset", "encoding"); err != nil {
		return err
	}
	stream := q.Get("stream")
	if stream == "" {
		stream = store.Stdout
	}
	if stream != store.Stdout && stream != store.Stderr {
		return badRequest("invalid_query", "stream must be stdout or stderr")
	}
	offset, err := queryOffset(q)
	if err != nil {
		return err
	}
	enc := q.Get("encoding")
	if enc != "" && enc != "base64" {
		return badRequest("invalid_query", "encoding must be base64, or left out for text")
	}
	sb, c, err := s.historyRecord(r)
	if err != nil {
		return err
	}
	size := c.Size(stream)
	offset = min(offset, size)
	chunks, err := s.store.ReadOutput(r.Context(), sb.ID, c.ID, stream, offset, maxLogRead)
	if err != nil {
		return err
	}
	data, err := joinOutput(chunks, offset, min(maxLogRead, size-offset))
	if err != nil {
		return err
	}
	out := map[string]any{"size": size}
	if enc == "" {
		if offset+int64(len(data)) < size {
			data = data[:fullRunes(data)] // the rest of a character cut in two comes next time
		}
		out["data"] = strings.ToValidUTF8(string(data), "\uFFFD")
	} else {
		out["data"] = base64.StdEncoding.EncodeToString(data)
	}
	next := offset + int64(len(data))
	out["next_offset"], out["done"] = next, !c.Open() && next >= size
	writeJSON(w, http.StatusOK, out)
	return nil
}

// queryOffset reads a byte offset from the query (0 when none).
func queryOffset(q url.Values) (int64, error) {
	o := q.Get("offset")
	if o == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(o, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("invalid_query", "offset must be a whole number, 0 or more")
	}
	return n, nil
}

// joinOutput is n bytes from offset out of chunks (in order, holding
// them).
func joinOutput(chunks []store.Output, offset, n int64) ([]byte, error) {
	var out []byte
	for _, ch := range chunks {
		if ch.Offset != offset+int64(len(out)) && len(out) > 0 {
			return nil, fmt.Errorf("stored output has a gap at %d", ch.Offset)
		}
		zr, err := gzip.NewReader(bytes.NewReader(ch.Gzip))
		if err != nil {
			return nil, fmt.Errorf("read stored output: %w", err)
		}
		raw, err := io.ReadAll(io.LimitReader(zr, ch.Size))
		if err != nil {
			return nil, fmt.Errorf("read stored output: %w", err)
		}
		if from := offset + int64(len(out)) - ch.Offset; from >= 0 && from < int64(len(raw)) {
			out = append(out, raw[from:]...)
		}
		if int64(len(out)) >= n {
			return out[:n], nil
		}
	}
	return out, nil
}

// fullRunes is the length of b's start that holds no character cut in
// two at its end.
func fullRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
