package embedded

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// The command history (store/history.go): records, their output chunks
// (kept per record, so a read or a delete touches only its own), and each
// account's compressed bytes per hour.

// outputRec is one stored chunk with the record it belongs to.
type outputRec struct {
	SandboxID string `json:"sandbox_id"`
	CommandID string `json:"command_id"`
	store.Output
}

// outputHour counts an account's compressed output in one hour.
type outputHour struct {
	AccountID string    `json:"account_id"`
	Hour      time.Time `json:"hour"`
	Bytes     int64     `json:"bytes"`
}

// history holds the command history's rows.
type history struct {
	commands map[string]*store.Command        // by commandKey
	outputs  map[string]map[string]*outputRec // commandKey → chunk key → chunk
	hours    map[string]*outputHour           // by hourKey
}

func newHistory() history {
	return history{commands: map[string]*store.Command{}, outputs: map[string]map[string]*outputRec{}, hours: map[string]*outputHour{}}
}

func commandKey(sandboxID, id string) string { return sandboxID + "/" + id }

func chunkKey(o *outputRec) string {
	return fmt.Sprintf("%s/%s/%s/%020d", o.SandboxID, o.CommandID, o.Stream, o.Offset)
}

func hourKey(accountID string, hour time.Time) string {
	return accountID + "/" + hour.UTC().Format(time.RFC3339)
}

// apply puts or deletes one of the history's rows.
func (h *history) apply(r record) {
	switch r.T {
	case tCommand:
		setOrDel(h.commands, r)
	case tHour:
		setOrDel(h.hours, r)
	case tOutput:
		// A chunk's key starts with its record's.
		sandboxID, rest, _ := strings.Cut(r.ID, "/")
		commandID, _, _ := strings.Cut(rest, "/")
		k := commandKey(sandboxID, commandID)
		if r.Del {
			delete(h.outputs[k], r.ID)
			if len(h.outputs[k]) == 0 {
				delete(h.outputs, k)
			}
			return
		}
		if h.outputs[k] == nil {
			h.outputs[k] = map[string]*outputRec{}
		}
		h.outputs[k][r.ID] = r.val.(*outputRec)
	}
}

// rows lists every row, for compaction.
func (h *history) rows(recs []record) []record {
	recs = appendAll(recs, tCommand, h.commands)
	recs = appendAll(recs, tHour, h.hours)
	for _, m := range h.outputs {
		recs = appendAll(recs, tOutput, m)
	}
	return recs
}

// deleteRecords lists the records that remove a sandbox's history.
func (h *history) deleteRecords(sandboxID string) []record {
	var recs []record
	for k, c := range h.commands {
		if c.SandboxID == sandboxID {
			recs = append(recs, h.commandRecords(k)...)
		}
	}
	return recs
}

// commandRecords lists the records that remove the record of key k and
// its output.
func (h *history) commandRecords(k string) []record {
	recs := []record{del(tCommand, k)}
	for ck := range h.outputs[k] {
		recs = append(recs, del(tOutput, ck))
	}
	return recs
}

func (s *Store) CreateCommand(ctx context.Context, c store.Command) (store.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, err := s.live(c.SandboxID)
	if err != nil {
		return store.Command{}, fmt.Errorf("record command %s: %w", c.ID, err)
	}
	k := commandKey(c.SandboxID, c.ID)
	if _, ok := s.history.commands[k]; ok {
		return store.Command{}, fmt.Errorf("record command %s: %w", c.ID, store.ErrConflict)
	}
	c.AccountID, c.StartedAt = sb.AccountID, store.Micro(c.StartedAt)
	if err := s.commit([]record{put(tCommand, k, clone(&c))}, nil); err != nil {
		return store.Command{}, err
	}
	return c, nil
}

func (s *Store) command(sandboxID, id string) (*store.Command, error) {
	c, ok := s.history.commands[commandKey(sandboxID, id)]
	if !ok {
		return nil, fmt.Errorf("command %s: %w", id, store.ErrNotFound)
	}
	return c, nil
}

func (s *Store) Command(ctx context.Context, sandboxID, id string) (store.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.command(sandboxID, id)
	if err != nil {
		return store.Command{}, err
	}
	return *clone(c), nil
}

func (s *Store) Commands(ctx context.Context, f store.CommandFilter) ([]store.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.Command{}
	for _, c := range s.history.commands {
		if f.Match(c) {
			out = append(out, *clone(c))
		}
	}
	slices.SortFunc(out, func(a, b store.Command) int { return store.NewerCommand(&a, &b) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (s *Store) OpenCommands(ctx context.Context) ([]store.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Command
	for _, c := range s.history.commands {
		if c.Open() {
			out = append(out, *clone(c))
		}
	}
	slices.SortFunc(out, func(a, b store.Command) int { return -store.NewerCommand(&a, &b) })
	return out, nil
}

func (s *Store) UpdateCommand(ctx context.Context, sandboxID, id string, fn func(*store.Command) error) (store.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.command(sandboxID, id)
	if err != nil {
		return store.Command{}, fmt.Errorf("update command: %w", err)
	}
	c, err := store.ChangeCommand(*clone(old), fn)
	if err != nil {
		return store.Command{}, fmt.Errorf("update command %s: %w", id, err)
	}
	if err := s.commit([]record{put(tCommand, commandKey(sandboxID, id), clone(&c))}, nil); err != nil {
		return store.Command{}, err
	}
	return c, nil
}

func (s *Store) AppendOutput(ctx context.Context, sandboxID, id string, out store.Output) (store.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.command(sandboxID, id)
	if err != nil {
		return store.Command{}, fmt.Errorf("store output: %w", err)
	}
	c := clone(old)
	out.At = store.Micro(out.At)
	hour := store.OutputHour(out.At)
	hk := hourKey(c.AccountID, hour)
	h := &outputHour{AccountID: c.AccountID, Hour: hour}
	if got, ok := s.history.hours[hk]; ok {
		h = clone(got)
	}
	use := store.OutputUse{Hour: h.Bytes}
	for _, o := range s.history.commands {
		if o.AccountID == c.AccountID {
			use.Total += o.StoredBytes
		}
	}
	keep, err := store.AcceptOutput(c, &out, use)
	if err != nil {
		return store.Command{}, fmt.Errorf("store output of command %s: %w", id, err)
	}
	recs := []record{put(tCommand, commandKey(sandboxID, id), c)}
	if keep {
		o := &outputRec{SandboxID: sandboxID, CommandID: id, Output: out}
		h.Bytes += int64(len(out.Gzip))
		recs = append(recs, put(tOutput, chunkKey(o), o), put(tHour, hk, h))
		// Hours past the cap's are forgotten as new ones come.
		for k, old := range s.history.hours {
			if old.AccountID == c.AccountID && old.Hour.Before(hour.Add(-time.Hour)) {
				recs = append(recs, del(tHour, k))
			}
		}
	}
	if err := s.commit(recs, nil); err != nil {
		return store.Command{}, err
	}
	return *clone(c), nil
}

func (s *Store) PruneHistory(ctx context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var recs []record
	n := 0
	for k, c := range s.history.commands {
		if c.Prunable(before) {
			recs = append(recs, s.history.commandRecords(k)...)
			n++
		}
	}
	for k, h := range s.history.hours {
		if h.Hour.Before(before.Add(-24 * time.Hour)) {
			recs = append(recs, del(tHour, k))
		}
	}
	if len(recs) == 0 {
		return 0, nil
	}
	return n, s.commit(recs, nil)
}

func (s *Store) ReadOutput(ctx context.Context, sandboxID, id, stream string, offset, n int64) ([]store.Output, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.command(sandboxID, id); err != nil {
		return nil, err
	}
	var out []store.Output
	for _, o := range s.history.outputs[commandKey(sandboxID, id)] {
		if o.Stream == stream && o.Offset+o.Size > offset && o.Offset < offset+n {
			out = append(out, clone(o).Output)
		}
	}
	slices.SortFunc(out, func(a, b store.Output) int { return cmp.Compare(a.Offset, b.Offset) })
	return out, nil
}
