package api

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/store"
	"froog.tech/froog/wake"
)

// Background jobs live on the sandbox's own disk, under ~/.froog/jobs/ID:
// command, stdin, output (stdout and stderr together), pid, exit_code once
// it ends, and killed once it was stopped. So they survive a stop, and
// every state is read from there: running (its process group is alive),
// exited, killed, or lost (it was running when the sandbox stopped).

var jobID = regexp.MustCompile(`^job_[0-9a-f]{16}$`)

const (
	jobDir      = `"$HOME/.froog/jobs/`
	maxJobChunk = 1 << 20
)

// script runs a short shell script of our own in the sandbox and returns
// its stdout; exit 3 means the job does not exist.
func (s *Server) script(r *http.Request, sb *store.Sandbox, script string, stdin []byte) ([]byte, error) {
	out, errOut := &capped{max: maxJobChunk + 4096}, &capped{max: 4096}
	res, err := s.run(r.Context(), sb, script, stdin, out, errOut, time.Minute)
	if errors.Is(err, errLost) {
		return nil, withCause(errorf(http.StatusBadGateway, "sandbox_connection_lost", "the connection to the sandbox was lost"), err)
	}
	if err != nil {
		return nil, err
	}
	switch res.code {
	case 0:
		return out.buf.Bytes(), nil
	case 3:
		return nil, errorf(http.StatusNotFound, "not_found", "no such job")
	}
	return nil, errorf(http.StatusBadGateway, "sandbox_error", "the sandbox could not do it: %s", strings.TrimSpace(errOut.buf.String()))
}

func (s *Server) startJob(w http.ResponseWriter, r *http.Request) error {
	var req commandRequest
	if err := readJSON(r, execBody, &req, false); err != nil {
		return err
	}
	stdin, err := req.check()
	if err != nil {
		return err
	}
	sb, release, err := s.commandSandbox(r)
	if err != nil {
		return err
	}
	defer release()
	env, err := s.commandEnv(sb, req.Env)
	if err != nil {
		return err
	}
	id := store.NewID("job")
	// The job runs in a session of its own (setsid: its process group is
	// its id for stop), reads the stdin file, and records its exit code.
	inner := "(" + prelude(req.cwd(), env) + "sh -c " + shellQuote(*req.Command) + ")"
	wrap := `d=$1; ` + inner + `; echo $? > "$d/exit_code.tmp" && mv "$d/exit_code.tmp" "$d/exit_code"`
	script := `d=` + jobDir + id + `" && mkdir -p "$d" && cat > "$d/stdin" && printf %s ` + shellQuote(*req.Command) + ` > "$d/command" && date +%s > "$d/started_at" && ` +
		`{ setsid sh -c ` + shellQuote(wrap) + ` sh "$d" < "$d/stdin" > "$d/output" 2>&1 & echo $! > "$d/pid"; } && cat "$d/started_at"`
	out, err := s.script(r, sb, script, stdin)
	if err != nil {
		return err
	}
	// The answer is the job as a read of it shows it (the document's Job).
	writeJSON(w, http.StatusCreated, jobView{ID: id, CommandID: id, State: "running", StartedAt: unixTime(strings.TrimSpace(string(out)))})
	return nil
}

// unixTime reads the unix seconds a job's started_at file holds; nil when
// it holds none.
func unixTime(secs string) *time.Time {
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n <= 0 {
		return nil
	}
	t := time.Unix(n, 0).UTC()
	return &t
}

// jobState is the shell that prints a job's "state code size started" line.
const jobState = `st=running; code=-
if [ -f "$d/exit_code" ]; then st=exited; code=$(cat "$d/exit_code"); [ -f "$d/killed" ] && st=killed
elif ! kill -s 0 -- "-$(cat "$d/pid" 2>/dev/null)" 2>/dev/null; then st=lost; [ -f "$d/killed" ] && st=killed; fi
printf '%s %s %s %s\n' "$st" "$code" "$(wc -c < "$d/output")" "$(cat "$d/started_at" 2>/dev/null || echo 0)"`

// jobView is the document's Job. Its command_id, its record in the
// command history, is its id here; started_at is RFC 3339 as every time
// the API answers (the sandbox keeps unix seconds).
type jobView struct {
	ID         string     `json:"id"`
	CommandID  string     `json:"command_id"`
	State      string     `json:"state"`
	ExitCode   *int       `json:"exit_code"`
	Command    string     `json:"command,omitempty"`
	StartedAt  *time.Time `json:"started_at"`
	OutputSize int64      `json:"output_size"`
}

// parseJobLine reads jobState's line.
func parseJobLine(id, line string) (jobView, error) {
	f := strings.Fields(line)
	if len(f) != 4 {
		return jobView{}, fmt.Errorf("job %s: unexpected state line %q", id, line)
	}
	v := jobView{ID: id, CommandID: id, State: f[0], StartedAt: unixTime(f[3])}
	if f[1] != "-" {
		if n, err := strconv.Atoi(f[1]); err == nil {
			v.ExitCode = &n
		}
	}
	v.OutputSize, _ = strconv.ParseInt(f[2], 10, 64)
	return v, nil
}

// jobFor finds the path's job and its running sandbox. Reading or
// stopping a job takes no command slot: polling jobs must not starve
// commands, and a stop must work when every slot is taken.
func (s *Server) jobFor(r *http.Request) (string, *store.Sandbox, error) {
	id := r.PathValue("id")
	if !jobID.MatchString(id) {
		return "", nil, errorf(http.StatusNotFound, "not_found", "no such job")
	}
	sb, err := s.runningSandbox(r)
	return id, sb, err
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "offset"); err != nil {
		return err
	}
	var offset int64
	if o := q.Get("offset"); o != "" {
		n, err := strconv.ParseInt(o, 10, 64)
		if err != nil || n < 0 {
			return badRequest("invalid_query", "offset must be a whole number, 0 or more")
		}
		offset = n
	}
	id, sb, err := s.jobFor(r)
	if err != nil {
		return err
	}
	script := `d=` + jobDir + id + `"; [ -d "$d" ] || exit 3
` + jobState + `
tail -c +` + strconv.FormatInt(offset+1, 10) + ` "$d/output" | head -c ` + strconv.Itoa(maxJobChunk)
	out, err := s.script(r, sb, script, nil)
	if err != nil {
		return err
	}
	line, data, _ := bytes.Cut(out, []byte("\n"))
	v, err := parseJobLine(id, string(line))
	if err != nil {
		return err
	}
	next := min(offset, v.OutputSize) + int64(len(data))
	writeJSON(w, http.StatusOK, map[string]any{
		"id": v.ID, "state": v.State, "exit_code": v.ExitCode, "output": strings.ToValidUTF8(string(data), "\uFFFD"),
		"output_b64": base64.StdEncoding.EncodeToString(data), "offset": offset, "next_offset": next,
		"done": v.State != "running" && next >= v.OutputSize,
	})
	return nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	sb, err := s.runningSandbox(r)
	if err != nil {
		return err
	}
	script := `for d in "$HOME"/.froog/jobs/job_*; do [ -d "$d" ] || continue
printf '%s ' "${d##*/}"; printf '%s' "$(head -c 200 "$d/command" | od -An -tx1 | tr -d ' \n')"; printf ' '
` + jobState + `
done`
	out, err := s.script(r, sb, script, nil)
	if err != nil {
		return err
	}
	jobs := []jobView{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		id, rest, _ := strings.Cut(sc.Text(), " ")
		cmdHex, rest, _ := strings.Cut(rest, " ")
		if !jobID.MatchString(id) {
			continue
		}
		v, err := parseJobLine(id, rest)
		if err != nil {
			continue
		}
		if b, err := hex.DecodeString(cmdHex); err == nil {
			v.Command = strings.ToValidUTF8(string(b), "\uFFFD")
		}
		jobs = append(jobs, v)
	}
	writeJSON(w, http.StatusOK, jobs)
	return nil
}

func (s *Server) stopJob(w http.ResponseWriter, r *http.Request) error {
	id, sb, err := s.jobFor(r)
	if err != nil {
		return err
	}
	// TERM to the job's process group, up to 5 s to go, then KILL.
	script := `d=` + jobDir + id + `"; [ -d "$d" ] || exit 3
pid=$(cat "$d/pid"); [ -f "$d/exit_code" ] || touch "$d/killed"
kill -s TERM -- "-$pid" 2>/dev/null
i=0; while kill -s 0 -- "-$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
kill -s KILL -- "-$pid" 2>/dev/null
` + jobState
	out, err := s.script(r, sb, script, nil)
	if err != nil {
		return err
	}
	v, err := parseJobLine(id, strings.TrimSpace(string(out)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

type waitRequest struct {
	Port        *int   `json:"port"`
	TimeoutSecs *int64 `json:"timeout_secs"`
}

func (s *Server) wait(w http.ResponseWriter, r *http.Request) error {
	var req waitRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Port == nil || *req.Port < 1 || *req.Port > 65535 {
		return invalid("port must be from 1 to 65535")
	}
	timeout := int64(wake.WaitTimeout / time.Second)
	if req.TimeoutSecs != nil {
		if *req.TimeoutSecs < 1 || *req.TimeoutSecs > 600 {
			return invalid("timeout_secs must be from 1 to 600")
		}
		timeout = *req.TimeoutSecs
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if s.sessions == nil {
		return errorf(http.StatusServiceUnavailable, "unavailable", "this API has no connection to sandboxes")
	}
	start := time.Now()
	// A sandbox that is still starting counts against the timeout.
	err = s.await(r, sb, *req.Port, time.Duration(timeout)*time.Second)
	if err != nil && !errors.Is(err, errWaitedOut) {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"port": *req.Port, "ready": err == nil, "waited_ms": time.Since(start).Milliseconds()})
	return nil
}
