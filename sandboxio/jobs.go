package sandboxio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Background jobs live on the sandbox's own disk, under ~/.froog/jobs/ID:
// command, stdin, output (stdout and stderr together), pid, exit_code once
// it ends, and killed once it was stopped. So they survive a stop, and
// every state is read from there: running (its process group is alive),
// exited, killed, or lost (it was running when the sandbox stopped).

const (
	jobDir = `"$HOME/.froog/jobs/`
	// MaxJobChunk bounds the output one read of a job returns.
	MaxJobChunk = 1 << 20
)

// ErrNoJob: the sandbox has no job of that id.
var ErrNoJob = errors.New("no such job")

// ScriptError: a script of ours failed in the sandbox; Stderr is what it
// said.
type ScriptError struct{ Stderr string }

func (e *ScriptError) Error() string { return "the sandbox could not do it: " + e.Stderr }

// Job is a job as a read of its directory shows it.
type Job struct {
	ID         string
	State      string // running, exited, killed or lost
	ExitCode   *int
	Command    string // in lists only: its first 200 bytes
	StartedAt  *time.Time
	OutputSize int64
}

// script runs a short shell script of our own in the sandbox and returns
// its stdout; exit 3 means the job does not exist.
func (sh *Shell) script(ctx context.Context, sandboxID, script string, stdin []byte) ([]byte, error) {
	out, errOut := &Capped{Max: MaxJobChunk + 4096}, &Capped{Max: 4096}
	res, err := sh.Run(ctx, sandboxID, script, stdin, out, errOut, time.Minute)
	if err != nil {
		return nil, err
	}
	switch res.Code {
	case 0:
		return out.Bytes(), nil
	case 3:
		return nil, ErrNoJob
	}
	return nil, &ScriptError{Stderr: strings.TrimSpace(errOut.String())}
}

// StartJob starts job id: command, run after prelude (Prelude), in a
// session of its own, reading stdin. It returns the job as it starts.
func (sh *Shell) StartJob(ctx context.Context, sandboxID, id, prelude, command string, stdin []byte) (Job, error) {
	// The job runs in a session of its own (setsid: its process group is
	// its id for stop), reads the stdin file, and records its exit code.
	inner := "(" + prelude + "sh -c " + Quote(command) + ")"
	wrap := `d=$1; ` + inner + `; echo $? > "$d/exit_code.tmp" && mv "$d/exit_code.tmp" "$d/exit_code"`
	script := `d=` + jobDir + id + `" && mkdir -p "$d" && cat > "$d/stdin" && printf %s ` + Quote(command) + ` > "$d/command" && date +%s > "$d/started_at" && ` +
		`{ setsid sh -c ` + Quote(wrap) + ` sh "$d" < "$d/stdin" > "$d/output" 2>&1 & echo $! > "$d/pid"; } && cat "$d/started_at"`
	out, err := sh.script(ctx, sandboxID, script, stdin)
	if err != nil {
		return Job{}, err
	}
	return Job{ID: id, State: "running", StartedAt: unixTime(strings.TrimSpace(string(out)))}, nil
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

// jobState is the shell that prints a job's "state code size started"
// line. A job is running while its process group lives, or its first
// process (which has not yet made the group, just after the start); the
// exit code is looked for again after both are found gone: a job that
// ends between the looks wrote it, and is exited, not lost. (The
// command history keeps the first end it sees.)
const jobState = `st=running; code=-; p=$(cat "$d/pid" 2>/dev/null)
[ -f "$d/exit_code" ] || kill -s 0 -- "-$p" 2>/dev/null || kill -s 0 "$p" 2>/dev/null || st=lost
if [ -f "$d/exit_code" ]; then st=exited; code=$(cat "$d/exit_code"); fi
[ "$st" != running ] && [ -f "$d/killed" ] && st=killed
printf '%s %s %s %s\n' "$st" "$code" "$(wc -c < "$d/output")" "$(cat "$d/started_at" 2>/dev/null || echo 0)"`

// parseJobLine reads jobState's line.
func parseJobLine(id, line string) (Job, error) {
	f := strings.Fields(line)
	if len(f) != 4 {
		return Job{}, fmt.Errorf("job %s: unexpected state line %q", id, line)
	}
	v := Job{ID: id, State: f[0], StartedAt: unixTime(f[3])}
	if f[1] != "-" {
		if n, err := strconv.Atoi(f[1]); err == nil {
			v.ExitCode = &n
		}
	}
	v.OutputSize, _ = strconv.ParseInt(f[2], 10, 64)
	return v, nil
}

// JobOutput reads job id and up to MaxJobChunk bytes of its output from
// offset.
func (sh *Shell) JobOutput(ctx context.Context, sandboxID, id string, offset int64) (Job, []byte, error) {
	script := `d=` + jobDir + id + `"; [ -d "$d" ] || exit 3
` + jobState + `
tail -c +` + strconv.FormatInt(offset+1, 10) + ` "$d/output" | head -c ` + strconv.Itoa(MaxJobChunk)
	out, err := sh.script(ctx, sandboxID, script, nil)
	if err != nil {
		return Job{}, nil, err
	}
	line, data, _ := bytes.Cut(out, []byte("\n"))
	v, err := parseJobLine(id, string(line))
	return v, data, err
}

// Jobs lists the sandbox's jobs, each with the start of its command;
// valid reports whether an id is a job's (the directory may hold others).
func (sh *Shell) Jobs(ctx context.Context, sandboxID string, valid func(id string) bool) ([]Job, error) {
	script := `for d in "$HOME"/.froog/jobs/job_*; do [ -d "$d" ] || continue
printf '%s ' "${d##*/}"; printf '%s' "$(head -c 200 "$d/command" | od -An -tx1 | tr -d ' \n')"; printf ' '
` + jobState + `
done`
	out, err := sh.script(ctx, sandboxID, script, nil)
	if err != nil {
		return nil, err
	}
	jobs := []Job{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		id, rest, _ := strings.Cut(sc.Text(), " ")
		cmdHex, rest, _ := strings.Cut(rest, " ")
		if !valid(id) {
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
	return jobs, nil
}

// StopJob stops job id: TERM to its process group, up to 5 s to go, then
// KILL. It returns the job as it is then.
func (sh *Shell) StopJob(ctx context.Context, sandboxID, id string) (Job, error) {
	script := `d=` + jobDir + id + `"; [ -d "$d" ] || exit 3
pid=$(cat "$d/pid"); [ -f "$d/exit_code" ] || touch "$d/killed"
kill -s TERM -- "-$pid" 2>/dev/null
i=0; while kill -s 0 -- "-$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
kill -s KILL -- "-$pid" 2>/dev/null
` + jobState
	out, err := sh.script(ctx, sandboxID, script, nil)
	if err != nil {
		return Job{}, err
	}
	return parseJobLine(id, strings.TrimSpace(string(out)))
}
