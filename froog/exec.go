package froog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"time"
)

// ExecOptions are a command's optional settings; nil means none.
type ExecOptions struct {
	// Cwd is the folder it runs in, relative to ~ or absolute.
	Cwd string
	// Env sets variables for this command only.
	Env map[string]string
	// Stdin is its standard input (up to 1 MiB).
	Stdin []byte
	// Timeout kills it past this (exit code 124); 0: the server's hour.
	Timeout time.Duration
}

func (o *ExecOptions) body(command string, stream bool) Exec {
	e := Exec{Command: command}
	if stream {
		e.Stream = Ptr(true)
	}
	if o == nil {
		return e
	}
	if o.Cwd != "" {
		e.Cwd = &o.Cwd
	}
	if len(o.Env) > 0 {
		e.Env = &o.Env
	}
	if o.Stdin != nil {
		e.StdinB64 = &o.Stdin
	}
	if o.Timeout > 0 {
		e.TimeoutSecs = Ptr(int((o.Timeout + time.Second - 1) / time.Second))
	}
	return e
}

// Exec runs command (through sh) and returns its output and exit code; a
// non-zero exit is not an error.
func (h *SandboxHandle) Exec(ctx context.Context, command string, o *ExecOptions) (*ExecResult, error) {
	res, err := h.c.ExecWithResponse(ctx, h.Name, o.body(command, false))
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// ExecStream runs command and yields its NDJSON events as they arrive:
// started, stdout and stderr (Data), then exit (ExitCode, TimedOut) or
// error (Code, Message). Stop ranging to end the command.
func (h *SandboxHandle) ExecStream(ctx context.Context, command string, o *ExecOptions) iter.Seq2[ExecEvent, error] {
	return func(yield func(ExecEvent, error) bool) {
		res, err := h.c.raw.Exec(ctx, h.Name, o.body(command, true))
		if err != nil {
			yield(ExecEvent{}, err)
			return
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			if len(sc.Bytes()) == 0 {
				continue
			}
			var e ExecEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				yield(ExecEvent{}, fmt.Errorf("froog: exec %s: decode an event: %w", h.Name, err))
				return
			}
			if !yield(e, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(ExecEvent{}, fmt.Errorf("froog: exec %s: read the stream: %w", h.Name, err))
		}
	}
}

// Spawn starts command as a background job, which outlives the request.
func (h *SandboxHandle) Spawn(ctx context.Context, command string, o *ExecOptions) (*JobHandle, error) {
	b := o.body(command, false)
	body := Command{Command: b.Command, Cwd: b.Cwd, Env: b.Env, StdinB64: b.StdinB64}
	res, err := h.c.StartJobWithResponse(ctx, h.Name, body)
	if err != nil {
		return nil, err
	}
	return h.Job(Text(res.JSON201.Id)), nil
}

// Jobs lists its background jobs.
func (h *SandboxHandle) Jobs(ctx context.Context) ([]Job, error) {
	res, err := h.c.ListJobsWithResponse(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	return *res.JSON200, nil
}

// Job is a handle on the job id; it sends no request.
func (h *SandboxHandle) Job(id string) *JobHandle { return &JobHandle{sb: h, ID: id} }

// JobHandle acts on one background job.
type JobHandle struct {
	sb *SandboxHandle
	ID string
}

// Logs reads its output (stdout and stderr together) from offset.
func (j *JobHandle) Logs(ctx context.Context, offset int) (*JobOutput, error) {
	res, err := j.sb.c.GetJobWithResponse(ctx, j.sb.Name, j.ID, &GetJobParams{Offset: &offset})
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// Follow copies its output to w as it arrives, until it ends, and returns
// its exit code (-1 when it ended without one: killed or lost).
func (j *JobHandle) Follow(ctx context.Context, w io.Writer) (int, error) {
	offset := 0
	for {
		out, err := j.Logs(ctx, offset)
		if err != nil {
			return -1, err
		}
		if _, err := w.Write(out.OutputB64); err != nil {
			return -1, err
		}
		offset = out.NextOffset
		if out.Done {
			if out.ExitCode == nil {
				return -1, nil
			}
			return *out.ExitCode, nil
		}
		if len(out.OutputB64) == 0 {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return -1, err
			}
		}
	}
}

// Kill stops it and everything it started.
func (j *JobHandle) Kill(ctx context.Context) error {
	_, err := j.sb.c.StopJobWithResponse(ctx, j.sb.Name, j.ID)
	return err
}
