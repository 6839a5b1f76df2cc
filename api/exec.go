package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
	"froog.tech/froog/tunnel"
)

// Sessions opens SSH sessions in sandboxes (package tunnel); the API's
// commands, jobs and SFTP sessions run on them through sandboxio.
type Sessions interface {
	Session(ctx context.Context, sandboxID string) (*ssh.Session, error)
}

// Commands runs shell commands in sandboxes (package sandboxio).
type Commands interface {
	Run(ctx context.Context, sandboxID, command string, stdin []byte, stdout, stderr io.Writer, timeout time.Duration) (sandboxio.Result, error)
}

var _ Commands = (*sandboxio.Shell)(nil)

// Limits of commands (the docs' Limits section).
const (
	maxOutput      = 1 << 20 // per stream, for a command's answer
	maxStdin       = 1 << 20
	maxCommand     = 64 << 10
	maxExecTimeout = 3600
	commandsAtOnce = 8
	// execBody is the body limit of routes that carry stdin: 1 MiB of
	// input, base64-encoded, plus the rest of the request.
	execBody = 2 << 20
)

// slots bounds the commands running at once in each sandbox.
type slots struct {
	mu   sync.Mutex
	used map[string]int
}

func (s *slots) take(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == nil {
		s.used = map[string]int{}
	}
	if s.used[id] >= commandsAtOnce {
		return false
	}
	s.used[id]++
	return true
}

func (s *slots) give(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[id]--; s.used[id] <= 0 {
		delete(s.used, id)
	}
}

// commandRequest is what exec and jobs share.
type commandRequest struct {
	Command  *string           `json:"command"`
	Cwd      *string           `json:"cwd"`
	Env      map[string]string `json:"env"`
	Stdin    *string           `json:"stdin"`
	StdinB64 *string           `json:"stdin_b64"`
}

// check validates the request and returns the decoded stdin.
func (req *commandRequest) check() ([]byte, error) {
	if req.Command == nil || strings.TrimSpace(*req.Command) == "" {
		return nil, invalid("command is required")
	}
	if len(*req.Command) > maxCommand || strings.ContainsRune(*req.Command, 0) {
		return nil, invalid("command is up to 64 KiB of text")
	}
	if req.Cwd != nil && (len(*req.Cwd) > 4096 || strings.ContainsRune(*req.Cwd, 0)) {
		return nil, invalid("cwd is a path of up to 4096 bytes")
	}
	if err := checkEnv(req.Env); err != nil {
		return nil, err
	}
	var stdin []byte
	switch {
	case req.Stdin != nil && req.StdinB64 != nil:
		return nil, invalid("give stdin or stdin_b64, not both")
	case req.Stdin != nil:
		stdin = []byte(*req.Stdin)
	case req.StdinB64 != nil:
		b, err := base64.StdEncoding.DecodeString(*req.StdinB64)
		if err != nil {
			return nil, invalid("stdin_b64 is not base64")
		}
		stdin = b
	}
	if len(stdin) > maxStdin {
		return nil, errorf(http.StatusRequestEntityTooLarge, "stdin_too_large", "stdin is up to 1 MiB; upload a file for more")
	}
	return stdin, nil
}

func (req *commandRequest) cwd() string {
	if req.Cwd == nil {
		return ""
	}
	return *req.Cwd
}

type execRequest struct {
	commandRequest
	TimeoutSecs *int64 `json:"timeout_secs"`
	Stream      *bool  `json:"stream"`
}

// runningSandbox finds the path's sandbox and checks it runs (starting
// it when it has auto_start), for calls that read or control what runs
// in it (jobs) and take no command slot.
func (s *Server) runningSandbox(r *http.Request) (*store.Sandbox, error) {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return nil, err
	}
	if s.commands == nil {
		return nil, errorf(http.StatusServiceUnavailable, "unavailable", "this API has no connection to sandboxes")
	}
	return s.awake(r, sb)
}

// commandSandbox is runningSandbox for a user's command (exec, a new
// job), which also takes one of the sandbox's command slots; release
// gives it back.
func (s *Server) commandSandbox(r *http.Request) (*store.Sandbox, func(), error) {
	sb, err := s.runningSandbox(r)
	if err != nil {
		return nil, nil, err
	}
	if !s.slots.take(sb.ID) {
		e := errorf(http.StatusTooManyRequests, "limit_reached", "%d commands already run in %q; run long ones in the background", commandsAtOnce, sb.Name)
		e.RetryAfter = 1
		e.RateLimit = &rateLimit{Limit: commandsAtOnce, Reset: 1}
		return nil, nil, e
	}
	return sb, func() { s.slots.give(sb.ID) }, nil
}

// errLost: the connection to the sandbox broke under a command.
var errLost = sandboxio.ErrLost

// run runs a shell command in sb (sandboxio's Run), its refusals to
// reach the sandbox made the API's answer.
func (s *Server) run(ctx context.Context, sb *store.Sandbox, command string, stdin []byte, stdout, stderr io.Writer, timeout time.Duration) (sandboxio.Result, error) {
	res, err := s.commands.Run(ctx, sb.ID, command, stdin, stdout, stderr, timeout)
	return res, ioError(sb, err)
}

// ioError makes sandboxio's refusal to reach sb the API's answer; other
// errors are returned as they are.
func ioError(sb *store.Sandbox, err error) error {
	var ue *sandboxio.UnreachableError
	if errors.As(err, &ue) {
		return unreachable(sb, ue.Err)
	}
	return err
}

// unreachable answers a call whose sandbox the tunnel could not reach.
// The client gets a fixed message: err (a dial's address and port, SSH's
// words) goes to the log only, with the request id.
func unreachable(sb *store.Sandbox, err error) error {
	if errors.Is(err, tunnel.ErrNotRunning) {
		return errorf(http.StatusConflict, "conflict", "sandbox %q is not running", sb.Name)
	}
	return withCause(errorf(http.StatusBadGateway, "sandbox_unreachable", "cannot reach sandbox %q; try again, or stop and start it", sb.Name), err)
}

// lostWhileRunning answers a command whose connection broke under it.
func lostWhileRunning(err error) error {
	return withCause(errorf(http.StatusBadGateway, "sandbox_connection_lost", "the connection to the sandbox was lost while the command ran"), err)
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	var req execRequest
	if err := readJSON(r, execBody, &req, false); err != nil {
		return err
	}
	stdin, err := req.check()
	if err != nil {
		return err
	}
	timeout := int64(maxExecTimeout)
	if req.TimeoutSecs != nil {
		if *req.TimeoutSecs < 1 || *req.TimeoutSecs > maxExecTimeout {
			return invalid("timeout_secs must be from 1 to %d", maxExecTimeout)
		}
		timeout = *req.TimeoutSecs
	}
	stream := (req.Stream != nil && *req.Stream) || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	sb, release, err := s.commandSandbox(r)
	if err != nil {
		return err
	}
	defer release()
	env, err := s.commandEnv(sb, req.Env)
	if err != nil {
		return err
	}
	id := store.NewID("cmd")
	command := sandboxio.Prelude(req.cwd(), env) + "exec sh -c " + sandboxio.Quote(*req.Command)
	// The history keeps the command, not its env's values.
	mode := store.ModeSync
	if stream {
		mode = store.ModeStream
	}
	if err := s.recordCommand(r.Context(), sb, id, mode, *req.Command); err != nil {
		return err
	}
	if stream {
		return s.execStream(w, r, sb, id, command, stdin, time.Duration(timeout)*time.Second)
	}
	stdout, stderr := &sandboxio.Capped{Max: maxOutput}, &sandboxio.Capped{Max: maxOutput}
	res, err := s.run(r.Context(), sb, command, stdin, stdout, stderr, time.Duration(timeout)*time.Second)
	s.finishCommand(r.Context(), sb, id, stdout, stderr, res, err, r.Context().Err() != nil)
	if errors.Is(err, errLost) {
		return lostWhileRunning(err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"exit_code": res.Code, "stdout": strings.ToValidUTF8(stdout.String(), "\uFFFD"),
		"stderr": strings.ToValidUTF8(stderr.String(), "\uFFFD"), "timed_out": res.TimedOut, "command_id": id,
	})
	return nil
}

// ndjson writes one JSON object per line and flushes it.
type ndjson struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (n *ndjson) send(v any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, _ := json.Marshal(v)
	n.w.Write(append(b, '\n'))
	http.NewResponseController(n.w).Flush()
}

// chunks turns a stream of bytes into "stdout"/"stderr" lines of UTF-8
// text, holding back a character cut in two until its end arrives.
type chunks struct {
	out  *ndjson
	kind string
	rest []byte
}

func (c *chunks) Write(p []byte) (int, error) {
	b := append(c.rest, p...)
	cut := fullRunes(b) // the last character may not be all here yet
	c.rest = append([]byte(nil), b[cut:]...)
	if cut > 0 {
		c.out.send(map[string]string{"type": c.kind, "data": strings.ToValidUTF8(string(b[:cut]), "\uFFFD")})
	}
	return len(p), nil
}

func (c *chunks) flush() {
	if len(c.rest) > 0 {
		c.out.send(map[string]string{"type": c.kind, "data": strings.ToValidUTF8(string(c.rest), "\uFFFD")})
		c.rest = nil
	}
}

func (s *Server) execStream(w http.ResponseWriter, r *http.Request, sb *store.Sandbox, id, command string, stdin []byte, timeout time.Duration) error {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := &ndjson{w: w}
	out.send(map[string]string{"type": "started", "command_id": id})
	stdout, stderr := &chunks{out: out, kind: "stdout"}, &chunks{out: out, kind: "stderr"}
	keptOut, keptErr := &sandboxio.Capped{Max: store.MaxWaitingOutput}, &sandboxio.Capped{Max: store.MaxWaitingOutput}
	res, err := s.run(r.Context(), sb, command, stdin, io.MultiWriter(stdout, keptOut), io.MultiWriter(stderr, keptErr), timeout)
	stdout.flush()
	stderr.flush()
	s.finishCommand(r.Context(), sb, id, keptOut, keptErr, res, err, r.Context().Err() != nil)
	switch {
	case err == nil:
		out.send(map[string]any{"type": "exit", "exit_code": res.Code, "timed_out": res.TimedOut})
	case r.Context().Err() != nil:
		// The client hung up: the command was killed, nobody to tell.
	default:
		// The answer has begun: the error goes in the stream, with the
		// message of its code alone, and its cause in the log.
		e := toError(err, s.now())
		if errors.Is(err, errLost) {
			e = toError(lostWhileRunning(err), s.now())
		}
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", requestID(r)), slog.String("error", e.Error()))
		out.send(map[string]string{"type": "error", "code": e.Code, "message": e.Message})
	}
	return nil
}
