package local

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// sshd is one sandbox's SSH server.
type sshd struct {
	id      string // the sandbox
	home    string
	bin     string // first on the commands' PATH; may be ""
	config  *ssh.ServerConfig
	log     *slog.Logger
	ln      net.Listener
	mu      sync.Mutex
	conns   map[*ssh.ServerConn]bool
	closed  bool
	serving sync.WaitGroup
}

func newSSHD(id, home, bin string, hostKey ssh.Signer, control ssh.PublicKey, log *slog.Logger) *sshd {
	want := control.Marshal()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), want) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("only the control plane's key is accepted")
		},
	}
	cfg.AddHostKey(hostKey)
	return &sshd{id: id, home: home, bin: bin, config: cfg, log: log, conns: map[*ssh.ServerConn]bool{}}
}

// listen starts serving on a new port of ip.
func (s *sshd) listen(ip string) (*net.TCPAddr, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for sandbox %s: %w", s.id, err)
	}
	s.ln = ln
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.serving.Add(1)
			go func() {
				defer s.serving.Done()
				s.serveConn(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr), nil
}

// close stops listening and ends every connection.
func (s *sshd) close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*ssh.ServerConn]bool{}
	s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range conns {
		c.Close()
	}
	s.serving.Wait()
}

func (s *sshd) serveConn(c net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		c.Close()
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sc.Close()
		return
	}
	s.conns[sc] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		sc.Close()
	}()
	go func() {
		for r := range reqs {
			// keepalive@openssh.com and anything else: answer, do nothing.
			if r.WantReply {
				r.Reply(r.Type == "keepalive@openssh.com", nil)
			}
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.session(ch, creqs) }()
		case "direct-tcpip":
			wg.Add(1)
			go func() { defer wg.Done(); s.directTCPIP(nc) }()
		default:
			nc.Reject(ssh.UnknownChannelType, "unsupported channel type")
		}
	}
}

// directTCPIP forwards a channel to a loopback port; anything else is
// refused.
func (s *sshd) directTCPIP(nc ssh.NewChannel) {
	var p struct {
		Host       string
		Port       uint32
		OriginHost string
		OriginPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
		nc.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	if !isLoopback(p.Host) || p.Port == 0 || p.Port > 65535 {
		nc.Reject(ssh.Prohibited, "only loopback destinations are allowed")
		return
	}
	if other := heldByOther(s.id, int(p.Port)); other != "" {
		// Not this sandbox's app: its own server could not listen (ports.go).
		s.log.Warn("local driver: refused a port another sandbox holds", "sandbox", s.id, "port", p.Port, "held_by", other)
		nc.Reject(ssh.ConnectionFailed, fmt.Sprintf("port %d is held by another sandbox on this host (the local driver shares the host's ports): this sandbox's server could not listen on it", p.Port))
		return
	}
	c, err := net.Dial("tcp", net.JoinHostPort(p.Host, fmt.Sprint(p.Port)))
	if err != nil {
		nc.Reject(ssh.ConnectionFailed, fmt.Sprintf("nothing listens on port %d", p.Port))
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		c.Close()
		return
	}
	go func() {
		// reqs ends when the channel closes, from either side or with the
		// connection: then the upstream goes too.
		for r := range reqs {
			if r.WantReply {
				r.Reply(false, nil)
			}
		}
		c.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(c, ch); c.(*net.TCPConn).CloseWrite() }()
	go func() { defer wg.Done(); io.Copy(ch, c); ch.CloseWrite() }()
	wg.Wait()
	ch.Close()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// session serves one session channel: env requests, then one exec.
func (s *sshd) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	env := []string{}
	var cmd *exec.Cmd
	exited := make(chan struct{})
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				// The client closed the channel: a command still running goes
				// with it. One that has ended is left alone, and so is its
				// process group: a background job may still be in it, on its
				// way to a session of its own (setsid), and must not be
				// killed for the session it came from.
				if cmd != nil {
					select {
					case <-exited:
					default:
						syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
						<-exited
					}
				}
				return
			}
			switch r.Type {
			case "env":
				var kv struct{ Name, Value string }
				if ssh.Unmarshal(r.Payload, &kv) != nil || kv.Name == "" || strings.Contains(kv.Name, "=") {
					r.Reply(false, nil)
					continue
				}
				env = append(env, kv.Name+"="+kv.Value)
				r.Reply(true, nil)
			case "exec":
				var p struct{ Command string }
				if cmd != nil || ssh.Unmarshal(r.Payload, &p) != nil {
					r.Reply(false, nil)
					continue
				}
				c, err := s.start(ch, p.Command, env)
				if err != nil {
					fmt.Fprintf(ch.Stderr(), "froog: %v\n", err)
					r.Reply(false, nil)
					return
				}
				r.Reply(true, nil)
				cmd = c
				go func() {
					status := exitStatus(c.Wait())
					// Ended before the client hears of it, so that its
					// close never finds the command still "running".
					close(exited)
					ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
					ch.CloseWrite()
					ch.Close()
				}()
			case "signal":
				var p struct{ Signal string }
				if cmd == nil || ssh.Unmarshal(r.Payload, &p) != nil {
					r.Reply(false, nil)
					continue
				}
				if sig, ok := signals[p.Signal]; ok {
					syscall.Kill(-cmd.Process.Pid, sig)
				}
				r.Reply(false, nil)
			case "subsystem":
				// sftp only (sftp.go), and only on a session with no command.
				var p struct{ Name string }
				if cmd != nil || ssh.Unmarshal(r.Payload, &p) != nil || p.Name != "sftp" {
					r.Reply(false, nil)
					continue
				}
				r.Reply(true, nil)
				go func() {
					for r := range reqs { // until the channel closes
						if r.WantReply {
							r.Reply(false, nil)
						}
					}
				}()
				s.serveSFTP(ch)
				// As a command's end: status, EOF, close (scp waits for all).
				ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, 0))
				ch.CloseWrite()
				ch.Close()
				return
			default:
				r.Reply(false, nil) // no pty, no shell
			}
		case <-exited:
			exited = nil // the command ended; wait for the channel to close
			cmd = nil
		}
	}
}

var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// start runs command with sh -c in the sandbox's home, in a process group
// of its own, tagged with the sandbox's id.
func (s *sshd) start(ch ssh.Channel, command string, env []string) (*exec.Cmd, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = s.home
	cmd.Env = append(append(baseEnv(s.home, s.bin), env...), tagVar+"="+s.id)
	// stdin through a pipe of our own: Wait must not wait for the client
	// to close its side after the command has ended.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, ch, ch.Stderr()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start command: %w", err)
	}
	pr.Close()
	go func() {
		io.Copy(pw, ch)
		pw.Close()
	}()
	return cmd, nil
}

// tagVar marks every process of a sandbox.
const tagVar = "FROOG_SANDBOX_ID"

// baseEnv is a command's environment before the client's: the host's
// PATH with bin (froog-desktop) first.
func baseEnv(home, bin string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	if bin != "" {
		path = bin + ":" + path
	}
	return []string{"HOME=" + home, "PATH=" + path, "USER=user", "LANG=C.UTF-8", "SHELL=/bin/sh"}
}

func exitStatus(err error) uint32 {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + uint32(ws.Signal())
		}
		return uint32(ee.ExitCode())
	}
	if err != nil {
		return 255
	}
	return 0
}
