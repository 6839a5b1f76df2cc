package api_test

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store/embedded"
)

// fakeSessionsTo is api.Sessions on one SSH connection, whatever the sandbox.
type fakeSessionsTo struct{ c *ssh.Client }

func (s fakeSessionsTo) Session(context.Context, string) (*ssh.Session, error) {
	return s.c.NewSession()
}

// fakeSSHServer is an SSH server on loopback that takes any client and
// answers a session's subsystem request with subsystem (other requests
// are refused); it returns a client logged in to it.
func fakeSSHServer(t *testing.T, subsystem func(ch ssh.Channel, req *ssh.Request)) *ssh.Client {
	t.Helper()
	return testkit.FakeSSHServer(t, func(ch ssh.Channel, reqs <-chan *ssh.Request) {
		for req := range reqs {
			if req.Type == "subsystem" {
				subsystem(ch, req)
				continue
			}
			req.Reply(false, nil)
		}
	})
}

// A sandbox whose SSH server refuses the sftp subsystem has no SFTP
// server; one whose server ends the session without an answer (as
// Debian 12's dropbear did when an earlier session's process ended) is
// unreachable for the moment. Both are 502 sandbox_unreachable.
func TestFilesSFTPFaults(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(ssh.Channel, *ssh.Request)
		want   string
	}{
		{"refused", func(_ ssh.Channel, req *ssh.Request) { req.Reply(false, nil) }, `sandbox \"box\" has no SFTP server`},
		{"closed without an answer", func(ch ssh.Channel, _ *ssh.Request) { ch.Close() }, `cannot reach sandbox \"box\"; try again`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := embedded.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, st, api.Options{Sessions: fakeSessionsTo{fakeSSHServer(t, c.answer)}})
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
			e.ran("box")
			r := e.do("GET", "/v1/sandboxes/box/files?path=.", e.admin, nil).want(t, 502, "sandbox_unreachable")
			if !strings.Contains(string(r.body), c.want) {
				t.Fatalf("got %s, want a message with %s", r.body, c.want)
			}
			// What SSH said is the log's, with the request id.
			if id := r.header.Get("X-Request-Id"); !strings.Contains(e.logs.String(), id) || c.name != "refused" && !strings.Contains(e.logs.String(), "EOF") {
				t.Fatalf("the log has not the cause of %s: %s", id, e.logs.String())
			}
		})
	}
}
