package sandboxio_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/sandboxio"
)

// fakeSandbox is an SSH server that runs each exec request with sh on
// this machine, HOME a folder of the test's: a sandbox as sandboxio
// sees it.
type fakeSandbox struct{ client *ssh.Client }

func (f fakeSandbox) Session(context.Context, string) (*ssh.Session, error) {
	return f.client.NewSession()
}

func newFakeSandbox(t *testing.T) fakeSandbox {
	t.Helper()
	home := t.TempDir()
	return fakeSandbox{client: testkit.FakeSSHServer(t, func(ch ssh.Channel, reqs <-chan *ssh.Request) { serveExec(ch, reqs, home) })}
}

func serveExec(ch ssh.Channel, reqs <-chan *ssh.Request, home string) {
	defer ch.Close()
	var cmd *exec.Cmd
	exited := make(chan struct{})
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				if cmd != nil {
					cmd.Process.Kill()
				}
				return
			}
			switch r.Type {
			case "exec":
				var p struct{ Command string }
				ssh.Unmarshal(r.Payload, &p)
				cmd = exec.Command("sh", "-c", p.Command)
				cmd.Dir, cmd.Env = home, []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
				cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					r.Reply(false, nil)
					return
				}
				r.Reply(true, nil)
				go func() {
					cmd.Wait()
					code := cmd.ProcessState.ExitCode()
					if code < 0 {
						code = 137
					}
					ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, uint32(code)))
					close(exited)
				}()
			case "signal":
				if cmd != nil {
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
			default:
				if r.WantReply {
					r.Reply(false, nil)
				}
			}
		case <-exited:
			return
		}
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	sh := sandboxio.New(newFakeSandbox(t))
	ctx := context.Background()
	for _, c := range []struct {
		name, command, stdin string
		timeout              time.Duration
		want                 sandboxio.Result
		wantOut              string
	}{
		{"output", "echo hi", "", 0, sandboxio.Result{}, "hi\n"},
		{"stdin", "cat", "in", 0, sandboxio.Result{}, "in"},
		{"exit code", "exit 7", "", 0, sandboxio.Result{Code: 7}, ""},
		{"prelude", sandboxio.Prelude("", map[string]string{"A": "it's"}) + "printf %s \"$A\"", "", 0, sandboxio.Result{}, "it's"},
		{"timeout", "sleep 30", "", 100 * time.Millisecond, sandboxio.Result{Code: 124, TimedOut: true}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := &sandboxio.Capped{Max: 2}
			if c.wantOut != "" {
				out.Max = 100
			}
			res, err := sh.Run(ctx, "sbx_1", c.command, []byte(c.stdin), out, io.Discard, c.timeout)
			if err != nil || res != c.want || out.String() != c.wantOut {
				t.Fatalf("got %+v %v %q, want %+v %q", res, err, out.String(), c.want, c.wantOut)
			}
		})
	}
	capped := &sandboxio.Capped{Max: 3}
	if _, err := sh.Run(ctx, "sbx_1", "echo 123456", nil, capped, io.Discard, 0); err != nil || capped.String() != "123" {
		t.Fatalf("capped: got %q %v, want %q", capped.String(), err, "123")
	}
}

// A sandbox the tunnel cannot reach is an UnreachableError wrapping the
// tunnel's error.
func TestRunUnreachable(t *testing.T) {
	t.Parallel()
	cause := errors.New("fake: no route")
	sh := sandboxio.New(fakeSessionsFail{cause})
	_, err := sh.Run(context.Background(), "sbx_1", "true", nil, io.Discard, io.Discard, 0)
	var ue *sandboxio.UnreachableError
	if !errors.As(err, &ue) || !errors.Is(err, cause) {
		t.Fatalf("got %v, want an UnreachableError of %v", err, cause)
	}
}

type fakeSessionsFail struct{ err error }

func (f fakeSessionsFail) Session(context.Context, string) (*ssh.Session, error) { return nil, f.err }

// A job starts, is read, listed and stopped, all from its folder on the
// sandbox's disk.
func TestJobs(t *testing.T) {
	t.Parallel()
	sh := sandboxio.New(newFakeSandbox(t))
	ctx := context.Background()
	const id = "job_0123456789abcdef"
	j, err := sh.StartJob(ctx, "sbx_1", id, sandboxio.Prelude("", nil), "echo out; sleep 30", nil)
	if err != nil || j.State != "running" || j.StartedAt == nil {
		t.Fatalf("start: got %+v %v", j, err)
	}
	wait.For(t, 10*time.Second, "the job's output", func() bool {
		_, data, err := sh.JobOutput(ctx, "sbx_1", id, 0)
		return err == nil && string(data) == "out\n"
	})
	if _, _, err := sh.JobOutput(ctx, "sbx_1", "job_ffffffffffffffff", 0); !errors.Is(err, sandboxio.ErrNoJob) {
		t.Fatalf("an unknown job: got %v, want ErrNoJob", err)
	}
	list, err := sh.Jobs(ctx, "sbx_1", func(id string) bool { return strings.HasPrefix(id, "job_") })
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Command != "echo out; sleep 30" {
		t.Fatalf("list: got %+v %v", list, err)
	}
	if j, err = sh.StopJob(ctx, "sbx_1", id); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the job killed", func() bool {
		j, _, err := sh.JobOutput(ctx, "sbx_1", id, 0)
		return err == nil && j.State == "killed"
	})
}
