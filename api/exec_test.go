package api_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/tunnel"
)

// liveEnv is an API whose sandboxes really run (testkit/live): hostctl
// with the local driver, and the tunnel.
type liveEnv struct {
	*env
	tun *tunnel.Tunnel
}

func forEachLiveStore(t *testing.T, fn func(t *testing.T, e *liveEnv)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			rig := live.Start(t, st)
			fn(t, &liveEnv{env: newEnv(t, st, api.Options{Sessions: rig.Tunnel}), tun: rig.Tunnel})
		})
	}
}

// running creates a sandbox and waits until it runs.
func (e *liveEnv) running(name string) string {
	e.t.Helper()
	e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": name}).want(e.t, 202, "")
	return e.waitState(name, "running")
}

func (e *liveEnv) waitState(name, state string) string {
	e.t.Helper()
	var sb struct{ ID, State string }
	// A minute: a start of the local driver takes a second alone, but went
	// past 15 s with three test packages at once on two cores.
	if !wait.Until(time.Minute, func() bool {
		e.do("GET", "/v1/sandboxes/"+name, e.admin, nil).json(e.t, &sb)
		return sb.State == state
	}) {
		e.t.Fatalf("%s never reached %s (it is %s)", name, state, sb.State)
	}
	return sb.ID
}

type execJSON struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out"`
	CommandID string `json:"command_id"`
}

func (e *liveEnv) exec(name string, req map[string]any) execJSON {
	e.t.Helper()
	var out execJSON
	e.do("POST", "/v1/sandboxes/"+name+"/exec", e.admin, req).want(e.t, 200, "").json(e.t, &out)
	return out
}

func TestExec(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.running("box")
		if r := e.exec("box", map[string]any{"command": "echo hi"}); r.Stdout != "hi\n" || r.ExitCode != 0 || !strings.HasPrefix(r.CommandID, "cmd_") {
			t.Fatalf("echo hi: %+v", r)
		}
		e.exec("box", map[string]any{"command": "mkdir sub"})
		r := e.exec("box", map[string]any{"command": `echo "$A-$B"; pwd; cat; echo e >&2; exit 5`, "env": map[string]string{"A": "x y", "B": "it's"},
			"cwd": "sub", "stdin": "in\n"})
		if !strings.HasPrefix(r.Stdout, "x y-it's\n") || !strings.HasSuffix(r.Stdout, "/home/sub\nin\n") || r.Stderr != "e\n" || r.ExitCode != 5 {
			t.Fatalf("env, cwd, stdin: %+v", r)
		}
		bin := []byte{0, 1, 2, 255, '\n'}
		if r := e.exec("box", map[string]any{"command": "od -An -tx1", "stdin_b64": base64.StdEncoding.EncodeToString(bin)}); strings.TrimSpace(r.Stdout) != "00 01 02 ff 0a" {
			t.Fatalf("stdin_b64: %q", r.Stdout)
		}
		if r := e.exec("box", map[string]any{"command": "head -c 3000000 /dev/zero | tr '\\0' a"}); len(r.Stdout) != 1<<20 {
			t.Fatalf("output cap: %d bytes, want 1 MiB", len(r.Stdout))
		}
		start := time.Now()
		r = e.exec("box", map[string]any{"command": "echo $$ > slow.pid; sleep 30", "timeout_secs": 1})
		if !r.TimedOut || r.ExitCode != 124 || time.Since(start) > 10*time.Second {
			t.Fatalf("timeout: %+v after %v", r, time.Since(start))
		}
		pid := strings.TrimSpace(e.exec("box", map[string]any{"command": "cat slow.pid"}).Stdout)
		waitGone(t, pid)

		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "cat", "stdin": strings.Repeat("x", 1<<20+1)}).want(t, 413, "stdin_too_large")
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "cat", "stdin": "a", "stdin_b64": "YQ=="}).want(t, 400, "invalid_value")
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "true", "timeout_secs": 3601}).want(t, 400, "invalid_value")
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "true", "timeout_secs": 0}).want(t, 400, "invalid_value")
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": ""}).want(t, 400, "invalid_value")
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"cmd": "ls"}).want(t, 400, "unknown_field")
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "true", "stdin_b64": "%%%"}).want(t, 400, "invalid_value")
		e.do("POST", "/v1/sandboxes/box/exec", e.key("ro", "sandbox.read"), map[string]any{"command": "true"}).want(t, 403, "api_key_action_forbidden")

		e.do("POST", "/v1/sandboxes/box/stop", e.admin, nil).want(t, 202, "")
		e.waitState("box", "stopped")
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "true"}).want(t, 409, "conflict")
		e.do("POST", "/v1/sandboxes/box/wait", e.admin, map[string]any{"port": 80}).want(t, 409, "conflict")
	})
}

func waitGone(t *testing.T, pid string) {
	t.Helper()
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatalf("pid %q: %v", pid, err)
	}
	wait.For(t, 10*time.Second, "process "+pid+" ends", func() bool {
		f := testkit.ProcStat(n)
		return f == nil || f[0] == "Z"
	})
}

// stream opens a streamed exec and returns its lines as they come.
func (e *liveEnv) stream(name, command string) (*http.Response, *bufio.Scanner) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"command": command})
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/sandboxes/"+name+"/exec", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Accept", "application/x-ndjson")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" {
		e.t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return res, bufio.NewScanner(res.Body)
}

func nextLine(t *testing.T, sc *bufio.Scanner) map[string]any {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("stream ended: %v", sc.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
		t.Fatalf("line %q: %v", sc.Text(), err)
	}
	return m
}

func TestExecStream(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		id := e.running("box")
		res, sc := e.stream("box", `echo one; sleep 0.2; printf 'caf\303'; sleep 0.1; printf '\251\n'; echo err >&2; exit 3`)
		if m := nextLine(t, sc); m["type"] != "started" || !strings.HasPrefix(m["command_id"].(string), "cmd_") {
			t.Fatalf("first line %v", m)
		}
		var out, errs strings.Builder
		var exit map[string]any
		for exit == nil {
			m := nextLine(t, sc)
			switch m["type"] {
			case "stdout":
				out.WriteString(m["data"].(string))
			case "stderr":
				errs.WriteString(m["data"].(string))
			case "exit":
				exit = m
			default:
				t.Fatalf("unexpected line %v", m)
			}
		}
		res.Body.Close()
		if out.String() != "one\ncafé\n" || errs.String() != "err\n" || exit["exit_code"] != 3.0 || exit["timed_out"] != false {
			t.Fatalf("stream: %q %q %v", out.String(), errs.String(), exit)
		}

		// Hanging up kills the command.
		res, sc = e.stream("box", `echo $$; sleep 60`)
		nextLine(t, sc)
		pid := strings.TrimSpace(nextLine(t, sc)["data"].(string))
		res.Body.Close()
		waitGone(t, pid)

		// At most 8 at once.
		var job struct{ ID string }
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "sleep 60"}).want(t, 201, "").json(t, &job)
		var open []*http.Response
		for i := 0; i < 8; i++ {
			res, sc := e.stream("box", "sleep 60")
			nextLine(t, sc)
			open = append(open, res)
		}
		full := e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "true"}).want(t, 429, "limit_reached")
		if full.header.Get("Retry-After") != "1" || full.header.Get("RateLimit-Limit") != "8" || full.header.Get("RateLimit-Remaining") != "0" {
			t.Fatalf("commands at once: Retry-After %q, RateLimit-Limit %q", full.header.Get("Retry-After"), full.header.Get("RateLimit-Limit"))
		}
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "true"}).want(t, 429, "limit_reached")
		// Reading jobs, waiting for a port and stopping a job take no slot.
		e.do("GET", "/v1/sandboxes/box/jobs", e.admin, nil).want(t, 200, "")
		e.do("GET", "/v1/sandboxes/box/jobs/"+job.ID, e.admin, nil).want(t, 200, "")
		e.do("POST", "/v1/sandboxes/box/wait", e.admin, map[string]any{"port": 1, "timeout_secs": 1}).want(t, 200, "")
		e.do("POST", "/v1/sandboxes/box/jobs/"+job.ID+"/stop", e.admin, nil).want(t, 200, "")
		for _, r := range open {
			r.Body.Close()
		}
		// The slots come back as the hung-up commands are killed.
		wait.For(t, 10*time.Second, "the command slots come back", func() bool {
			return e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": "true"}).status == 200
		})

		// The connection breaks under a running stream: a clear error, and
		// the next exec redials and works.
		deadline := time.Now().Add(10 * time.Second)
		var lost map[string]any
		for lost == nil {
			res, sc = e.stream("box", "echo up; sleep 60")
			nextLine(t, sc)
			if m := nextLine(t, sc); m["type"] == "stdout" {
				e.tun.Drop(id)
				lost = nextLine(t, sc)
			}
			res.Body.Close()
			if time.Now().After(deadline) {
				t.Fatal("no stream started")
			}
		}
		if lost["type"] != "error" || lost["code"] != "sandbox_connection_lost" {
			t.Fatalf("after the cut: %v", lost)
		}
		if r := e.exec("box", map[string]any{"command": "echo back"}); r.Stdout != "back\n" {
			t.Fatalf("exec after the cut: %+v", r)
		}
	})
}

type jobJSON struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ExitCode   *int   `json:"exit_code"`
	Output     string `json:"output"`
	NextOffset int64  `json:"next_offset"`
	Done       bool   `json:"done"`
}

func (e *liveEnv) job(name, id string, offset int64) jobJSON {
	e.t.Helper()
	var j jobJSON
	e.do("GET", fmt.Sprintf("/v1/sandboxes/%s/jobs/%s?offset=%d", name, id, offset), e.admin, nil).want(e.t, 200, "").json(e.t, &j)
	return j
}

func TestJobsAndWait(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.running("box")
		var j jobJSON
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "cat; echo second; exit 4", "stdin": "first\n"}).want(t, 201, "").json(t, &j)
		if !strings.HasPrefix(j.ID, "job_") || j.State != "running" {
			t.Fatalf("job: %+v", j)
		}
		var got jobJSON
		if !wait.Until(10*time.Second, func() bool { got = e.job("box", j.ID, 0); return got.Done }) {
			t.Fatalf("job never ended: %+v", got)
		}
		if got.State != "exited" || got.ExitCode == nil || *got.ExitCode != 4 || got.Output != "first\nsecond\n" || got.NextOffset != 13 {
			t.Fatalf("ended job: %+v", got)
		}
		if part := e.job("box", j.ID, 6); part.Output != "second\n" || part.NextOffset != 13 {
			t.Fatalf("from offset 6: %+v", part)
		}
		if past := e.job("box", j.ID, 100); past.Output != "" || past.NextOffset != 13 {
			t.Fatalf("past the end: %+v", past)
		}

		// A server in the background, and wait for its port.
		port := loopback.FreePort(t)
		var srv jobJSON
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port)}).want(t, 201, "").json(t, &srv)
		var w struct {
			Port     int   `json:"port"`
			Ready    bool  `json:"ready"`
			WaitedMs int64 `json:"waited_ms"`
		}
		e.do("POST", "/v1/sandboxes/box/wait", e.admin, map[string]any{"port": port, "timeout_secs": 20}).want(t, 200, "").json(t, &w)
		if !w.Ready || w.Port != port {
			t.Fatalf("wait: %+v; the server's job: %+v", w, e.job("box", srv.ID, 0))
		}
		closed := loopback.FreePort(t)
		e.do("POST", "/v1/sandboxes/box/wait", e.admin, map[string]any{"port": closed, "timeout_secs": 1}).want(t, 200, "").json(t, &w)
		if w.Ready || w.WaitedMs < 700 {
			t.Fatalf("wait on a closed port: %+v", w)
		}
		e.do("POST", "/v1/sandboxes/box/wait", e.admin, map[string]any{"port": 0}).want(t, 400, "invalid_value")
		e.do("POST", "/v1/sandboxes/box/wait", e.admin, map[string]any{"port": 80, "timeout_secs": 601}).want(t, 400, "invalid_value")

		var list []jobJSON
		e.do("GET", "/v1/sandboxes/box/jobs", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 2 {
			t.Fatalf("jobs: %+v", list)
		}

		// A job survives a stop and warm start, still running.
		e.do("POST", "/v1/sandboxes/box/stop", e.admin, nil).want(t, 202, "")
		e.waitState("box", "stopped")
		e.do("POST", "/v1/sandboxes/box/start", e.admin, nil).want(t, 202, "")
		e.waitState("box", "running")
		if s := e.job("box", srv.ID, 0); s.State != "running" {
			t.Fatalf("job after a warm start: %+v", s)
		}
		var stopped jobJSON
		e.do("POST", "/v1/sandboxes/box/jobs/"+srv.ID+"/stop", e.admin, nil).want(t, 200, "").json(t, &stopped)
		if stopped.State != "killed" {
			t.Fatalf("stopped job: %+v", stopped)
		}
		e.do("POST", "/v1/sandboxes/box/wait", e.admin, map[string]any{"port": port, "timeout_secs": 1}).want(t, 200, "").json(t, &w)
		if w.Ready {
			t.Fatal("the port still listens after the job was stopped")
		}
		e.do("GET", "/v1/sandboxes/box/jobs/job_0000000000000000", e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/box/jobs/nope", e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/box/jobs/"+srv.ID+"?offset=-1", e.admin, nil).want(t, 400, "invalid_query")
	})
}

// fakeSessionsRefused is api.Sessions whose every dial fails the way the
// tunnel's does when a sandbox's SSH server is gone: with its address.
type fakeSessionsRefused struct{}

func (fakeSessionsRefused) Session(context.Context, string) (*ssh.Session, error) {
	return nil, fmt.Errorf("dial sandbox sbx_1 at 10.1.2.3:2222: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
}

// TestUnreachableSaysLittle: a sandbox the API cannot reach is answered
// 502 sandbox_unreachable with a fixed message on every route that goes
// in (exec, streamed exec, jobs, files): no address, port or dial error;
// the cause is in the log line of the request, with its request id.
func TestUnreachableSaysLittle(t *testing.T) {
	t.Parallel()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, st, api.Options{Sessions: fakeSessionsRefused{}})
	e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
	e.ran("box")
	const fixed = `cannot reach sandbox "box"; try again, or stop and start it`
	for _, c := range []struct{ name, method, path, body string }{
		{"exec", "POST", "/v1/sandboxes/box/exec", `{"command": "true"}`},
		{"exec stream", "POST", "/v1/sandboxes/box/exec", `{"command": "true", "stream": true}`},
		{"jobs", "GET", "/v1/sandboxes/box/jobs", ""},
		{"job start", "POST", "/v1/sandboxes/box/jobs", `{"command": "sleep 1"}`},
		{"files", "GET", "/v1/sandboxes/box/files?path=.", ""},
		{"file content", "GET", "/v1/sandboxes/box/files/content?path=f.txt", ""},
		{"search", "GET", "/v1/sandboxes/box/files/search?pattern=x", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, e.admin, c.body)
			msg := ""
			if r.status == 200 { // streamed: the error is a line of the stream
				var line struct{ Type, Code, Message string }
				for l := range strings.SplitSeq(strings.TrimSpace(string(r.body)), "\n") {
					json.Unmarshal([]byte(l), &line)
				}
				if line.Type != "error" || line.Code != "sandbox_unreachable" {
					t.Fatalf("the stream's last line: %s", r.body)
				}
				msg = line.Message
			} else {
				var b struct{ Error struct{ Message string } }
				r.want(t, 502, "sandbox_unreachable").json(t, &b)
				msg = b.Error.Message
			}
			if msg != fixed {
				t.Errorf("message %q, want %q", msg, fixed)
			}
			// The request id is random hex: it may hold "2222" by chance.
			id := r.header.Get("X-Request-Id")
			for _, leak := range []string{"10.1.2.3", "2222", "dial", "refused", "sbx_1"} {
				if strings.Contains(strings.ReplaceAll(string(r.body), id, ""), leak) {
					t.Errorf("the answer holds %q: %s", leak, r.body)
				}
			}
			var logged bool
			for l := range strings.SplitSeq(e.logs.String(), "\n") {
				logged = logged || strings.Contains(l, id) && strings.Contains(l, "10.1.2.3:2222: dial tcp: connection refused")
			}
			if !logged {
				t.Errorf("no log line with %s and the cause:\n%s", id, e.logs.String())
			}
		})
	}
}
