package desktop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/names"
)

// Sessions opens SSH sessions in sandboxes (package tunnel).
type Sessions interface {
	Session(ctx context.Context, sandboxID string) (*ssh.Session, error)
}

// SSHStarter is the Starter of real sandboxes: it runs `froog-desktop
// start --kind KIND` in the sandbox over SSH (idempotent: it answers at
// once when the desktop runs) and reads the VNC port from its answer. It
// remembers the port for the sandbox's current run, so that a websocket
// to a running desktop costs no command.
type SSHStarter struct {
	Sessions  Sessions
	Sandboxes Sandboxes // the run a remembered port belongs to
	// Browser: a desktop it starts opens a browser window
	// (froog-desktop start --browser), once.
	Browser bool

	mu    sync.Mutex
	ports map[starterKey]startedDesktop
}

type starterKey struct{ sandboxID, kind string }

type startedDesktop struct {
	since   time.Time
	profile string
	port    int
	audio   int     // the sound server's port, 0 for none
	stream  *Stream // nil until StartStream asked for Selkies in this run
}

var (
	_ StreamStarter = (*SSHStarter)(nil)
	_ SoundStarter  = (*SSHStarter)(nil)
)

// StartDesktop starts the sandbox's desktop (or browser view, with its
// profile) if it is not running and returns its VNC port.
func (s *SSHStarter) StartDesktop(ctx context.Context, sandboxID, kind, profile string) (int, error) {
	since, running := s.Sandboxes.Running(sandboxID)
	if !running {
		return 0, errors.New("the sandbox is not running")
	}
	k := starterKey{sandboxID, kind}
	s.mu.Lock()
	if d, ok := s.ports[k]; ok && d.since.Equal(since) && d.profile == profile {
		s.mu.Unlock()
		return d.port, nil
	}
	s.mu.Unlock()
	st, err := s.run(ctx, sandboxID, kind, profile, "")
	if err != nil {
		return 0, err
	}
	s.remember(k, since, startedDesktop{since: since, profile: profile, port: st.VNCPort, audio: st.AudioPort})
	return st.VNCPort, nil
}

// StartSound is StartDesktop that returns the screen's sound port
// instead, ErrNoSound where it has none.
func (s *SSHStarter) StartSound(ctx context.Context, sandboxID, kind, profile string) (int, error) {
	if _, err := s.StartDesktop(ctx, sandboxID, kind, profile); err != nil {
		return 0, err
	}
	s.mu.Lock()
	d := s.ports[starterKey{sandboxID, kind}]
	s.mu.Unlock()
	if d.audio == 0 {
		return 0, ErrNoSound
	}
	return d.audio, nil
}

// StartStream is StartDesktop that also starts Selkies where the sandbox
// has it, handing froog-desktop the master token on stdin
// (--selkies-token-stdin). It remembers the answer for the run too.
func (s *SSHStarter) StartStream(ctx context.Context, sandboxID, kind, profile, masterToken string) (Stream, error) {
	since, running := s.Sandboxes.Running(sandboxID)
	if !running {
		return Stream{}, errors.New("the sandbox is not running")
	}
	if masterToken == "" || strings.ContainsAny(masterToken, "\r\n") {
		return Stream{}, errors.New("start stream: no master token")
	}
	k := starterKey{sandboxID, kind}
	s.mu.Lock()
	if d, ok := s.ports[k]; ok && d.since.Equal(since) && d.profile == profile && d.stream != nil {
		s.mu.Unlock()
		return *d.stream, nil
	}
	s.mu.Unlock()
	st, err := s.run(ctx, sandboxID, kind, profile, masterToken)
	if err != nil {
		return Stream{}, err
	}
	s.remember(k, since, startedDesktop{since: since, profile: profile, port: st.VNCPort, audio: st.AudioPort, stream: &st})
	return st, nil
}

func (s *SSHStarter) remember(k starterKey, since time.Time, d startedDesktop) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ports == nil {
		s.ports = map[starterKey]startedDesktop{}
	}
	for key, d := range s.ports { // forget earlier runs
		if key.sandboxID == k.sandboxID && !d.since.Equal(since) {
			delete(s.ports, key)
		}
	}
	s.ports[k] = d
}

// Forget drops what is remembered of a sandbox's desktop (its VNC
// server went away): the next StartDesktop asks the sandbox again.
func (s *SSHStarter) Forget(sandboxID, kind string) {
	s.mu.Lock()
	delete(s.ports, starterKey{sandboxID, kind})
	s.mu.Unlock()
}

// run runs froog-desktop start in the sandbox; with a master token, it
// asks for Selkies too and writes the token to the command's stdin (never
// its command line, which other users of the sandbox could read).
func (s *SSHStarter) run(ctx context.Context, sandboxID, kind, profile, masterToken string) (Stream, error) {
	cmd, err := startCommand(kind, profile, s.Browser)
	if err != nil {
		return Stream{}, err
	}
	sess, err := s.Sessions.Session(ctx, sandboxID)
	if err != nil {
		return Stream{}, fmt.Errorf("start desktop: %w", err)
	}
	defer sess.Close()
	var out, errb bytes.Buffer
	sess.Stdout, sess.Stderr = &out, &errb
	if masterToken != "" {
		cmd += " --selkies-token-stdin"
		sess.Stdin = strings.NewReader(masterToken + "\n")
	}
	done := make(chan error, 1)
	go func() { done <- sess.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		<-done
		return Stream{}, fmt.Errorf("start desktop: %w", ctx.Err())
	}
	if err != nil {
		return Stream{}, fmt.Errorf("start desktop: froog-desktop: %v: %s", err, firstLine(errb.String()))
	}
	return parseStarted(out.Bytes(), kind)
}

// startCommand is the shell command that starts a screen of kind: the
// profile, which came from a link, is one single-quoted word (the API
// checked it, but the sandbox's shell must not be the second check).
// With browser, a desktop opens a browser window when it starts.
func startCommand(kind, profile string, browser bool) (string, error) {
	switch {
	case kind != names.ViewDesktop && kind != names.ViewBrowser:
		return "", fmt.Errorf("no desktop of kind %q", kind)
	case profile != "" && kind != names.ViewBrowser:
		return "", fmt.Errorf("a profile is for the browser view, not the %s", kind)
	case strings.ContainsAny(profile, "\x00\n\r"):
		return "", errors.New("a profile with a control character")
	}
	cmd := "froog-desktop start --kind " + kind
	if browser && kind == names.ViewDesktop {
		cmd += " --browser"
	}
	if profile != "" {
		cmd += " --profile '" + strings.ReplaceAll(profile, "'", `'\''`) + "'"
	}
	return cmd, nil
}

// parseStarted reads froog-desktop's answer: one JSON object with the
// kind, the VNC port, where Selkies runs its port ("transport":
// "selkies"; an answer without it is VNC only), and where the screen has
// sound its sound port ("audio_port").
func parseStarted(b []byte, kind string) (Stream, error) {
	var a struct {
		Kind        string `json:"kind"`
		VNCPort     int    `json:"vnc_port"`
		Transport   string `json:"transport"`
		SelkiesPort int    `json:"selkies_port"`
		AudioPort   int    `json:"audio_port"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &a); err != nil {
		return Stream{}, fmt.Errorf("start desktop: froog-desktop said %q: %w", firstLine(string(b)), err)
	}
	if a.Kind != kind || a.VNCPort < 1 || a.VNCPort > 65535 {
		return Stream{}, fmt.Errorf("start desktop: froog-desktop answered kind %q port %d", a.Kind, a.VNCPort)
	}
	st := Stream{VNCPort: a.VNCPort}
	if a.AudioPort > 0 && a.AudioPort <= 65535 {
		st.AudioPort = a.AudioPort
	}
	if a.Transport == "selkies" {
		if a.SelkiesPort < 1 || a.SelkiesPort > 65535 {
			return Stream{}, fmt.Errorf("start desktop: froog-desktop answered selkies port %d", a.SelkiesPort)
		}
		st.SelkiesPort = a.SelkiesPort
	}
	return st, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
