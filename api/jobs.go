package api

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
	"froog.tech/froog/wake"
)

// Jobs are background commands kept on a sandbox's own disk (package
// sandboxio, which says how).
type Jobs interface {
	StartJob(ctx context.Context, sandboxID, id, prelude, command string, stdin []byte) (sandboxio.Job, error)
	JobOutput(ctx context.Context, sandboxID, id string, offset int64) (sandboxio.Job, []byte, error)
	Jobs(ctx context.Context, sandboxID string, valid func(id string) bool) ([]sandboxio.Job, error)
	StopJob(ctx context.Context, sandboxID, id string) (sandboxio.Job, error)
}

var _ Jobs = (*sandboxio.Shell)(nil)

var jobID = regexp.MustCompile(`^job_[0-9a-f]{16}$`)

// jobError is the answer to a job call's error in sb.
func jobError(sb *store.Sandbox, err error) error {
	var se *sandboxio.ScriptError
	switch {
	case errors.Is(err, sandboxio.ErrNoJob):
		return errorf(http.StatusNotFound, "not_found", "no such job")
	case errors.As(err, &se):
		return errorf(http.StatusBadGateway, "sandbox_error", "the sandbox could not do it: %s", se.Stderr)
	case errors.Is(err, errLost):
		return withCause(errorf(http.StatusBadGateway, "sandbox_connection_lost", "the connection to the sandbox was lost"), err)
	}
	return ioError(sb, err)
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
	if err := s.recordCommand(r.Context(), sb, id, store.ModeDetached, *req.Command); err != nil {
		return err
	}
	j, err := s.jobs.StartJob(r.Context(), sb.ID, id, sandboxio.Prelude(req.cwd(), env), *req.Command, stdin)
	if err != nil {
		s.finishCommand(r.Context(), sb, id, &sandboxio.Capped{}, &sandboxio.Capped{}, sandboxio.Result{}, err, false) // failed: it could not run
		return jobError(sb, err)
	}
	// The answer is the job as a read of it shows it (the document's Job).
	writeJSON(w, http.StatusCreated, viewJob(j))
	return nil
}

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

// viewJob is j as the document's Job.
func viewJob(j sandboxio.Job) jobView {
	return jobView{ID: j.ID, CommandID: j.ID, State: j.State, ExitCode: j.ExitCode, Command: j.Command, StartedAt: j.StartedAt, OutputSize: j.OutputSize}
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
	offset, err := queryOffset(q)
	if err != nil {
		return err
	}
	id, sb, err := s.jobFor(r)
	if err != nil {
		return err
	}
	v, data, err := s.jobs.JobOutput(r.Context(), sb.ID, id, offset)
	if err != nil {
		return jobError(sb, err)
	}
	s.jobRead(r.Context(), sb, v, offset, data)
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
	list, err := s.jobs.Jobs(r.Context(), sb.ID, jobID.MatchString)
	if err != nil {
		return jobError(sb, err)
	}
	jobs := make([]jobView, 0, len(list))
	for _, j := range list {
		jobs = append(jobs, viewJob(j))
	}
	writeJSON(w, http.StatusOK, jobs)
	return nil
}

func (s *Server) stopJob(w http.ResponseWriter, r *http.Request) error {
	id, sb, err := s.jobFor(r)
	if err != nil {
		return err
	}
	j, err := s.jobs.StopJob(r.Context(), sb.ID, id)
	if err != nil {
		return jobError(sb, err)
	}
	if c, err := s.store.Command(r.Context(), sb.ID, id); err == nil {
		if err := s.copier().Copy(r.Context(), sb.ID, c); err != nil {
			s.historyFailed(r.Context(), sb, id, err)
		}
	}
	v := viewJob(j)
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
	if s.commands == nil {
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
