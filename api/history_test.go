package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

type historyRecord struct {
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

type historyPage struct {
	Commands   []historyRecord `json:"commands"`
	NextCursor *string         `json:"next_cursor"`
}

type historyLogs struct {
	Data       string `json:"data"`
	NextOffset int64  `json:"next_offset"`
	Size       int64  `json:"size"`
	Done       bool   `json:"done"`
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// storedCommand puts an ended record with its output in the store, as
// an exec leaves it.
func (e *env) storedCommand(sandboxID, id, mode string, at time.Time, stdout ...[]byte) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.store.CreateCommand(ctx, store.Command{ID: id, SandboxID: sandboxID, Command: "make " + id, Mode: mode, Status: store.CommandRunning, StartedAt: at}); err != nil {
		e.t.Fatal(err)
	}
	var off int64
	for _, b := range stdout {
		if _, err := e.store.AppendOutput(ctx, sandboxID, id, store.Output{Stream: store.Stdout, Offset: off, Size: int64(len(b)), Gzip: gz(b), At: at}); err != nil {
			e.t.Fatal(err)
		}
		off += int64(len(b))
	}
	code := 0
	if _, err := e.store.UpdateCommand(ctx, sandboxID, id, func(c *store.Command) error {
		c.Status, c.ExitCode, c.EndedAt = store.CommandExited, &code, &at
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) sandboxID(name string) string {
	e.t.Helper()
	sb, err := e.store.Sandbox(context.Background(), e.account.ID, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb.ID
}

// TestHistoryRoutes: the routes read the store alone (the sandbox here
// never runs), page newest first, read output in reads of at most 1 MiB
// (text or base64), and refuse malformed queries and keys out of scope.
func TestHistoryRoutes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "other"}).want(t, 202, "")
		id := e.sandboxID("box")
		at := e.now()
		big := bytes.Repeat([]byte("é"), 700_000) // 1.4 MB of two-byte characters
		e.storedCommand(id, "cmd_0000000000000001", store.ModeSync, at, []byte("hello\n"))
		e.storedCommand(id, "job_0000000000000002", store.ModeDetached, at.Add(time.Second), big[:1<<20+1], big[1<<20+1:])
		e.storedCommand(id, "cmd_0000000000000003", store.ModeStream, at.Add(2*time.Second))

		ro := e.key("ro", "sandbox.read")
		var page historyPage
		e.do("GET", "/v1/sandboxes/box/command-history", ro, nil).want(t, 200, "").json(t, &page)
		if len(page.Commands) != 3 || page.Commands[0].ID != "cmd_0000000000000003" || page.Commands[2].ID != "cmd_0000000000000001" || page.NextCursor != nil {
			t.Fatalf("list: %+v", page)
		}
		if c := page.Commands[1]; c.Mode != "detached" || c.Status != "exited" || c.StdoutSize != int64(len(big)) || c.Sandbox != "box" || c.Command != "make job_0000000000000002" {
			t.Fatalf("the job's record: %+v", c)
		}
		// Pages of one, by the cursor.
		var seen []string
		cursor := ""
		for range 4 {
			var p historyPage
			e.do("GET", "/v1/sandboxes/box/command-history?limit=1"+cursor, ro, nil).want(t, 200, "").json(t, &p)
			for _, c := range p.Commands {
				seen = append(seen, c.ID)
			}
			if p.NextCursor == nil {
				break
			}
			cursor = "&cursor=" + url.QueryEscape(*p.NextCursor)
		}
		if strings.Join(seen, " ") != "cmd_0000000000000003 job_0000000000000002 cmd_0000000000000001" {
			t.Fatalf("pages of one: %v", seen)
		}
		e.do("GET", "/v1/sandboxes/box/command-history?mode=detached", ro, nil).want(t, 200, "").json(t, &page)
		if len(page.Commands) != 1 || page.Commands[0].ID != "job_0000000000000002" {
			t.Fatalf("mode=detached: %+v", page)
		}

		var one historyRecord
		e.do("GET", "/v1/sandboxes/box/command-history/cmd_0000000000000001", ro, nil).want(t, 200, "").json(t, &one)
		if one.Status != "exited" || one.ExitCode == nil || *one.ExitCode != 0 || one.StdoutSize != 6 || one.EndedAt == nil {
			t.Fatalf("one record: %+v", one)
		}
		logs := func(id, query string) historyLogs {
			t.Helper()
			var l historyLogs
			e.do("GET", "/v1/sandboxes/box/command-history/"+id+"/logs"+query, ro, nil).want(t, 200, "").json(t, &l)
			return l
		}
		if l := logs("cmd_0000000000000001", ""); l.Data != "hello\n" || l.NextOffset != 6 || l.Size != 6 || !l.Done {
			t.Fatalf("logs: %+v", l)
		}
		if l := logs("cmd_0000000000000001", "?offset=2&encoding=base64"); l.Data != base64.StdEncoding.EncodeToString([]byte("llo\n")) || l.NextOffset != 6 {
			t.Fatalf("logs as base64 from 2: %+v", l)
		}
		if l := logs("cmd_0000000000000001", "?stream=stderr"); l.Data != "" || l.Size != 0 || !l.Done {
			t.Fatalf("no stderr: %+v", l)
		}
		if l := logs("cmd_0000000000000001", "?offset=100"); l.Data != "" || l.NextOffset != 6 || !l.Done {
			t.Fatalf("past the end: %+v", l)
		}
		// The big output, read to its end: 1 MiB a read at most, never a
		// character cut in two, every byte once.
		var text strings.Builder
		var off int64
		reads := 0
		for {
			l := logs("job_0000000000000002", fmt.Sprintf("?offset=%d", off))
			if int64(len(l.Data)) > 1<<20 || strings.ContainsRune(l.Data, '\uFFFD') {
				t.Fatalf("read %d from %d: %d bytes, or a character cut", reads, off, len(l.Data))
			}
			text.WriteString(l.Data)
			off, reads = l.NextOffset, reads+1
			if l.Done {
				break
			}
			if reads > 3 {
				t.Fatalf("never done after %d reads at %d", reads, off)
			}
		}
		if text.String() != string(big) || reads != 2 {
			t.Fatalf("the big output: %d bytes in %d reads, want %d in 2", text.Len(), reads, len(big))
		}
		var b64 historyLogs
		e.do("GET", "/v1/sandboxes/box/command-history/job_0000000000000002/logs?encoding=base64&offset=1", ro, nil).want(t, 200, "").json(t, &b64)
		if raw, _ := base64.StdEncoding.DecodeString(b64.Data); len(raw) != 1<<20 || !bytes.Equal(raw, big[1:1<<20+1]) || b64.NextOffset != 1<<20+1 || b64.Done {
			t.Fatalf("base64 from an odd offset: %d bytes, next %d, done %v", len(raw), b64.NextOffset, b64.Done)
		}

		limited := e.keyWith("other-only", func(k *store.APIKey) { k.Sandboxes = []string{"other"} }, "*")
		for _, tt := range []struct {
			name, path, key string
			status          int
			code            string
		}{
			{"no key", "/command-history", "", 401, ""},
			{"no sandbox.read", "/command-history", e.key("exec-only", "exec"), 403, "api_key_action_forbidden"},
			{"another sandbox's key: list", "/command-history", limited, 403, "api_key_sandbox_forbidden"},
			{"another sandbox's key: record", "/command-history/cmd_0000000000000001", limited, 403, "api_key_sandbox_forbidden"},
			{"another sandbox's key: logs", "/command-history/cmd_0000000000000001/logs", limited, 403, "api_key_sandbox_forbidden"},
			{"unknown mode", "/command-history?mode=async", ro, 400, "invalid_query"},
			{"limit 0", "/command-history?limit=0", ro, 400, "invalid_query"},
			{"limit 201", "/command-history?limit=201", ro, 400, "invalid_query"},
			{"a cursor of nothing", "/command-history?cursor=yesterday", ro, 400, "invalid_query"},
			{"a cursor with no id", "/command-history?cursor=2026-01-01T00:00:00Z_x", ro, 400, "invalid_query"},
			{"unknown parameter", "/command-history?status=running", ro, 400, "invalid_query"},
			{"record: unknown parameter", "/command-history/cmd_0000000000000001?x=1", ro, 400, "invalid_query"},
			{"record: not an id", "/command-history/nope", ro, 404, "not_found"},
			{"record: no such id", "/command-history/cmd_00000000000000ff", ro, 404, "not_found"},
			{"logs: unknown stream", "/command-history/cmd_0000000000000001/logs?stream=both", ro, 400, "invalid_query"},
			{"logs: negative offset", "/command-history/cmd_0000000000000001/logs?offset=-1", ro, 400, "invalid_query"},
			{"logs: offset not a number", "/command-history/cmd_0000000000000001/logs?offset=1k", ro, 400, "invalid_query"},
			{"logs: unknown encoding", "/command-history/cmd_0000000000000001/logs?encoding=hex", ro, 400, "invalid_query"},
			{"logs: no such id", "/command-history/job_00000000000000ff/logs", ro, 404, "not_found"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				e.do("GET", "/v1/sandboxes/box"+tt.path, tt.key, nil).want(t, tt.status, tt.code)
			})
		}
		// A record is found only under its own sandbox.
		e.do("GET", "/v1/sandboxes/other/command-history/cmd_0000000000000001", limited, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/other/command-history", limited, nil).want(t, 200, "").json(t, &page)
		if len(page.Commands) != 0 {
			t.Fatalf("another sandbox's list: %+v", page)
		}
		e.do("GET", "/v1/sandboxes/nobox/command-history", e.admin, nil).want(t, 404, "not_found")

		// Deleted with the sandbox.
		e.do("DELETE", "/v1/sandboxes/box", e.admin, nil).want(t, 202, "")
		if _, err := e.store.Command(context.Background(), id, "cmd_0000000000000001"); err == nil {
			t.Fatal("a deleted sandbox's record is still in the store")
		}
	})
}

func (e *liveEnv) record(name, id string) historyRecord {
	e.t.Helper()
	var c historyRecord
	e.do("GET", "/v1/sandboxes/"+name+"/command-history/"+id, e.admin, nil).want(e.t, 200, "").json(e.t, &c)
	return c
}

func (e *liveEnv) output(name, id, stream string) historyLogs {
	e.t.Helper()
	var l historyLogs
	e.do("GET", "/v1/sandboxes/"+name+"/command-history/"+id+"/logs?stream="+stream, e.admin, nil).want(e.t, 200, "").json(e.t, &l)
	return l
}

// TestHistoryRecordsCommands: exec (sync, timed out, streamed, hung up)
// and jobs (read, stopped, copied by the copier or by hostctl at stop,
// paused by a warm stop and running again after the start) leave the
// records the docs say.
func TestHistoryRecordsCommands(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.running("box")
		srv := e.handler.(*api.Server)

		r := e.exec("box", map[string]any{"command": "echo out; echo err >&2; exit 3", "env": map[string]string{"SECRET_VALUE": "s3cr3t"}})
		c := e.record("box", r.CommandID)
		if c.Mode != "sync" || c.Status != "exited" || c.ExitCode == nil || *c.ExitCode != 3 || c.Command != "echo out; echo err >&2; exit 3" || c.EndedAt == nil || c.OutputTruncated {
			t.Fatalf("sync exec's record: %+v", c)
		}
		if l := e.output("box", r.CommandID, "stdout"); l.Data != "out\n" || !l.Done {
			t.Fatalf("its stdout: %+v", l)
		}
		if l := e.output("box", r.CommandID, "stderr"); l.Data != "err\n" || !l.Done {
			t.Fatalf("its stderr: %+v", l)
		}
		r = e.exec("box", map[string]any{"command": "sleep 30", "timeout_secs": 1})
		if c := e.record("box", r.CommandID); c.Status != "timed_out" || *c.ExitCode != 124 {
			t.Fatalf("timed out: %+v", c)
		}
		r = e.exec("box", map[string]any{"command": "head -c 3000000 /dev/zero | tr '\\0' a"})
		if c := e.record("box", r.CommandID); c.StdoutSize != 1<<20 || !c.OutputTruncated {
			t.Fatalf("past 1 MiB: %+v", c)
		}

		res, sc := e.stream("box", "echo streamed; echo e >&2")
		started := nextLine(t, sc)
		for sc.Scan() {
		}
		res.Body.Close()
		sid, _ := started["command_id"].(string)
		if c := e.record("box", sid); c.Mode != "stream" || c.Status != "exited" || *c.ExitCode != 0 {
			t.Fatalf("streamed exec's record: %+v", c)
		}
		if l := e.output("box", sid, "stdout"); l.Data != "streamed\n" {
			t.Fatalf("its stdout: %+v", l)
		}
		res, sc = e.stream("box", "echo going; sleep 60")
		started = nextLine(t, sc)
		nextLine(t, sc) // "going": it runs
		res.Body.Close()
		hung, _ := started["command_id"].(string)
		wait.For(t, 10*time.Second, "the hung-up command's record ends", func() bool { return e.record("box", hung).Status == "killed" })

		var j jobJSON
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "echo one; echo two >&2; exit 2"}).want(t, 201, "").json(t, &j)
		if c := e.record("box", j.ID); c.Mode != "detached" || c.Status != "running" {
			t.Fatalf("a new job's record: %+v", c)
		}
		wait.For(t, 10*time.Second, "the job ends", func() bool { return e.job("box", j.ID, 0).Done })
		if c := e.record("box", j.ID); c.Status != "exited" || *c.ExitCode != 2 || c.StdoutSize != 8 {
			t.Fatalf("a read job's record: %+v", c)
		}
		if l := e.output("box", j.ID, "stdout"); l.Data != "one\ntwo\n" || !l.Done {
			t.Fatalf("its output, stdout and stderr together: %+v", l)
		}

		// Never read through the API: the copier copies it.
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "seq 1 3; exec sleep 600"}).want(t, 201, "").json(t, &j)
		wait.For(t, 10*time.Second, "the copier stores the job's first lines", func() bool {
			if err := srv.CopyHistory(context.Background()); err != nil {
				t.Fatal(err)
			}
			return e.output("box", j.ID, "stdout").Data == "1\n2\n3\n"
		})
		if c := e.record("box", j.ID); c.Status != "running" {
			t.Fatalf("a running job's record: %+v", c)
		}

		// An exec's record left running past the longest timeout (its API
		// process died under it) is lost.
		for id, at := range map[string]time.Time{"cmd_00000000000000dd": e.now().Add(-2 * time.Hour), "cmd_00000000000000de": e.now()} {
			if _, err := e.store.CreateCommand(context.Background(), store.Command{ID: id, SandboxID: e.sandboxID("box"),
				Command: "orphan", Mode: store.ModeSync, Status: store.CommandRunning, StartedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		if err := srv.CopyHistory(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := e.record("box", "cmd_00000000000000dd"); c.Status != "lost" || c.EndedAt == nil {
			t.Fatalf("an orphaned exec's record: %+v", c)
		}
		if c := e.record("box", "cmd_00000000000000de"); c.Status != "running" {
			t.Fatalf("a running exec's record after the copier: %+v", c)
		}
		if c := e.record("box", sid); c.Status != "exited" {
			t.Fatalf("an ended exec's record after the copier: %+v", c)
		}

		var killed jobJSON
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "echo bye; exec sleep 600"}).want(t, 201, "").json(t, &killed)
		wait.For(t, 10*time.Second, "the job prints", func() bool { return e.job("box", killed.ID, 0).Output == "bye\n" })
		e.do("POST", "/v1/sandboxes/box/jobs/"+killed.ID+"/stop", e.admin, nil).want(t, 200, "")
		if c := e.record("box", killed.ID); c.Status != "killed" || c.EndedAt == nil {
			t.Fatalf("a stopped job's record: %+v", c)
		}

		// What a job printed since it was last copied is copied when the
		// sandbox stops (hostctl's last copy; the exec that watches it
		// copies nothing).
		var late jobJSON
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "echo late; exec sleep 600"}).want(t, 201, "").json(t, &late)
		wait.For(t, 10*time.Second, "the job prints", func() bool {
			return e.exec("box", map[string]any{"command": "cat .froog/jobs/" + late.ID + "/output"}).Stdout == "late\n"
		})
		if l := e.output("box", late.ID, "stdout"); l.Size != 0 {
			t.Fatalf("copied before the stop: %+v", l)
		}

		// A warm stop pauses the running job; the start runs it again.
		e.do("POST", "/v1/sandboxes/box/stop", e.admin, nil).want(t, 202, "")
		e.waitState("box", "stopped")
		if l := e.output("box", late.ID, "stdout"); l.Data != "late\n" {
			t.Fatalf("the output a stop copied: %+v", l)
		}
		if err := srv.CopyHistory(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := e.record("box", j.ID); c.Status != "paused" {
			t.Fatalf("a job of a warm stopped sandbox: %+v", c)
		}
		if l := e.output("box", r.CommandID, "stdout"); l.Size != 1<<20 {
			t.Fatalf("read while stopped: %+v", l)
		}
		var page historyPage
		e.do("GET", "/v1/sandboxes/box/command-history?mode=detached", e.admin, nil).want(t, 200, "").json(t, &page)
		if len(page.Commands) != 4 || page.Commands[0].ID != late.ID {
			t.Fatalf("the jobs while stopped: %+v", page.Commands)
		}
		e.do("GET", "/v1/sandboxes/box/command-history?limit=200", e.admin, nil).want(t, 200, "").json(t, &page)
		if len(page.Commands) < 9 {
			t.Fatalf("the history while stopped: %d records", len(page.Commands))
		}
		for _, c := range page.Commands {
			if strings.Contains(c.Command, "s3cr3t") {
				t.Fatal("the history keeps an env value")
			}
		}
		e.do("POST", "/v1/sandboxes/box/start", e.admin, nil).want(t, 202, "")
		e.waitState("box", "running")
		if err := srv.CopyHistory(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := e.record("box", j.ID); c.Status != "running" {
			t.Fatalf("a job after a warm start: %+v", c)
		}
	})
}

// TestHistoryMonitoringOff: a sandbox made with monitoring: false runs
// commands and jobs as any other, keeps no record of them, and answers
// its history and metrics 409 monitoring_off; a fork keeps the setting
// unless asked otherwise.
func TestHistoryMonitoringOff(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "bad", "monitoring": "no"}).want(t, 400, "invalid_value")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "quiet", "monitoring": false}).want(t, 202, "")
		id := e.waitState("quiet", "running")
		var sb struct{ Monitoring *bool }
		e.do("GET", "/v1/sandboxes/quiet", e.admin, nil).want(t, 200, "").json(t, &sb)
		if sb.Monitoring == nil || *sb.Monitoring {
			t.Fatalf("monitoring: %v, want false", sb.Monitoring)
		}
		if r := e.exec("quiet", map[string]any{"command": "echo still"}); r.Stdout != "still\n" || r.CommandID == "" {
			t.Fatalf("exec with monitoring off: %+v", r)
		}
		var j jobJSON
		e.do("POST", "/v1/sandboxes/quiet/jobs", e.admin, map[string]any{"command": "echo job"}).want(t, 201, "").json(t, &j)
		wait.For(t, 10*time.Second, "the job ends", func() bool { return e.job("quiet", j.ID, 0).Done })
		for _, path := range []string{"/command-history", "/command-history/" + j.ID, "/command-history/" + j.ID + "/logs", "/metrics", "/processes"} {
			e.do("GET", "/v1/sandboxes/quiet"+path, e.admin, nil).want(t, 409, "monitoring_off")
		}
		if list, err := e.store.Commands(context.Background(), store.CommandFilter{SandboxID: id}); err != nil || len(list) != 0 {
			t.Fatalf("records kept with monitoring off: %+v, %v", list, err)
		}

		e.do("POST", "/v1/sandboxes/quiet/fork", e.admin, map[string]any{"name": "quiet-copy"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/quiet/fork", e.admin, map[string]any{"name": "loud", "monitoring": true}).want(t, 202, "")
		for name, want := range map[string]bool{"quiet-copy": false, "loud": true} {
			e.do("GET", "/v1/sandboxes/"+name, e.admin, nil).want(t, 200, "").json(t, &sb)
			if sb.Monitoring == nil || *sb.Monitoring != want {
				t.Errorf("fork %s: monitoring %v, want %v", name, sb.Monitoring, want)
			}
		}
	})
}
