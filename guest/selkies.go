package guest

// Selkies, the fast stream (H.264 over one websocket), next to VNC:
// froog-desktop runs it on a screen when it is installed (the OS image
// installs it where PyPI is reachable, deploy/images/build.sh) and the
// edge has handed over a master token (start --selkies-token-stdin).
// Pinned: Selkies at commit 3a0bc7af4b3c0b6270bd1173f8f20c41348d17ea
// (see desktop/selkies.go for what was read). Its launch, from its
// settings.py and stream_server.py:
//
//	selkies --mode=websockets --addr=127.0.0.1 --port=PORT
//	        --enable-basic-auth=false   (else it refuses to start without a password;
//	                                     the master token gates it instead)
//	        --enable-resize=false       (the screen keeps its size; VNC shares it)
//	        --is-manual-resolution-mode=true --manual-width=1920 --manual-height=1080
//	                                    (capture the whole screen: without a size from
//	                                     the page, Selkies would capture 1024x768 of it)
//	        --enable-dual-mode=false    (no switching to WebRTC)
//	        --audio-enabled=false       (the screen's sound has a channel of its own,
//	                                     sound.go, the same on either transport)
//	        --use-cpu=true
//	        --enable-clipboard=false    (the browser view only: no clipboard, as over VNC)
//	env:    DISPLAY, SELKIES_MASTER_TOKEN (the token: never on a command line,
//	        which every user of the sandbox can read in /proc; a process's
//	        environment is readable by its own user only)
//
// The token is kept in a 0600 file in the state folder (KIND.selkies-token);
// the supervisor (re)starts Selkies whenever it changes, and writes
// KIND.selkies.json once Selkies' /api/health answers with that token's
// hash in it, which is what start waits for.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SelkiesBase plus a display's number is its Selkies port (:10 is 6110).
const SelkiesBase = 6100

// Transports a running screen offers, in State.Transport.
const (
	TransportSelkies = "selkies"
	TransportVNC     = "vnc"
)

// selkiesStartTimeout bounds how long start waits for Selkies to answer
// with a new token; after it, start reports VNC (the fallback).
const selkiesStartTimeout = 30 * time.Second

// selkiesArgs are Selkies' flags for kind's screen on display n. The
// browser view has no clipboard, as over VNC.
func selkiesArgs(k Kind, n int) []string {
	args := []string{"--mode=websockets", "--addr=127.0.0.1", "--port=" + strconv.Itoa(SelkiesBase+n),
		"--enable-basic-auth=false", "--enable-resize=false", "--enable-dual-mode=false",
		"--is-manual-resolution-mode=true", "--manual-width=" + strconv.Itoa(Width), "--manual-height=" + strconv.Itoa(Height),
		"--audio-enabled=false", "--use-cpu=true"}
	if k == KindBrowser {
		args = append(args, "--enable-clipboard=false")
	}
	return args
}

// ValidSelkiesToken says whether t may be a master token: 16 to 256
// base64url characters (the edge's are 43).
func ValidSelkiesToken(t string) error {
	if len(t) < 16 || len(t) > 256 {
		return errors.New("selkies token: want 16 to 256 characters")
	}
	for _, c := range []byte(t) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return errors.New("selkies token: want base64url characters only")
		}
	}
	return nil
}

// ReadSelkiesToken reads the token from r (stdin): one line.
func ReadSelkiesToken(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1024))
	if err != nil {
		return "", fmt.Errorf("selkies token: %w", err)
	}
	t := strings.TrimRight(string(b), "\r\n")
	return t, ValidSelkiesToken(t)
}

func tokenPath(dir string, k Kind) string   { return filepath.Join(dir, string(k)+".selkies-token") }
func selkiesPath(dir string, k Kind) string { return filepath.Join(dir, string(k)+".selkies.json") }

func tokenHash(t string) string {
	s := sha256.Sum256([]byte(t))
	return hex.EncodeToString(s[:])
}

// selkiesRecord is KIND.selkies.json: the running Selkies.
type selkiesRecord struct {
	Port      int    `json:"port"`
	PID       int    `json:"pid"`
	TokenHash string `json:"token_sha256"`
}

// writeToken keeps the token in its 0600 file, replaced atomically when
// it changed.
func writeToken(dir string, k Kind, t string) error {
	if b, err := os.ReadFile(tokenPath(dir, k)); err == nil && string(b) == t {
		return nil
	}
	tmp := tokenPath(dir, k) + ".new"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write selkies token: %w", err)
	}
	_, err = f.WriteString(t)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, tokenPath(dir, k))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write selkies token: %w", err)
	}
	return nil
}

// readSelkies reads the running Selkies' record; ok is false when there
// is none, its process is gone or its port does not answer.
func readSelkies(dir string, k Kind) (selkiesRecord, bool) {
	var r selkiesRecord
	b, err := os.ReadFile(selkiesPath(dir, k))
	if err != nil || json.Unmarshal(b, &r) != nil || r.PID <= 0 || r.Port <= 0 || r.Port > 65535 {
		return r, false
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(r.PID)); err != nil {
		return r, false
	}
	return r, selkiesHealthy(r.Port) == nil
}

// withTransport fills in which transport a running screen offers:
// Selkies where it runs and answers, else VNC.
func withTransport(dir string, st State) State {
	if !st.Running {
		return st
	}
	st.Transport, st.SelkiesPort = TransportVNC, 0
	if r, ok := readSelkies(dir, st.Kind); ok {
		st.Transport, st.SelkiesPort = TransportSelkies, r.Port
	}
	return st
}

// awaitSelkies waits, where Selkies is installed, until it runs with the
// token t, and returns the screen's state with its transport.
func awaitSelkies(dir string, st State, t string) State {
	if t != "" && have("selkies") {
		want := tokenHash(t)
		waitUntil(selkiesStartTimeout, func() bool {
			r, ok := readSelkies(dir, st.Kind)
			return ok && r.TokenHash == want
		})
	}
	return withTransport(dir, st)
}

var healthClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
	DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}

// selkiesHealthy asks Selkies' /api/health on 127.0.0.1.
func selkiesHealthy(port int) error {
	res, err := healthClient.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/api/health")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("selkies health: status %d", res.StatusCode)
	}
	return nil
}

// selkies runs Selkies on display n while ctx lasts: whenever the token
// file holds a token and the program is installed, it (re)starts it with
// that token, restarts it when the token changes or it exits, and keeps
// KIND.selkies.json while it answers.
func (s *supervisor) selkies(done <-chan struct{}, n int) {
	dir, k := s.o.StateDir, s.o.Kind
	var (
		cmd     *exec.Cmd
		exited  chan struct{}
		running string // the hash of the token the running one has
		healthy bool
		backoff = 500 * time.Millisecond
		next    time.Time
	)
	stop := func() {
		if cmd != nil {
			terminate(cmd.Process, exited)
			cmd, running, healthy = nil, "", false
			os.Remove(selkiesPath(dir, k))
		}
	}
	defer stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		if cmd != nil {
			select {
			case <-exited:
				s.log.Info("selkies ended; starting it again", "state", cmd.ProcessState.String(), "after", backoff)
				cmd, running, healthy = nil, "", false
				os.Remove(selkiesPath(dir, k))
				next = time.Now().Add(backoff)
				backoff = min(2*backoff, 10*time.Second)
			default:
			}
		}
		b, err := os.ReadFile(tokenPath(dir, k))
		tok := string(b)
		if err != nil || ValidSelkiesToken(tok) != nil || !have("selkies") {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.log.Warn("selkies token unreadable", "err", err)
			}
			stop()
			continue
		}
		if cmd != nil && running != tokenHash(tok) {
			s.log.Info("selkies token changed; restarting it")
			stop()
		}
		if cmd == nil && time.Now().After(next) {
			c := exec.Command("selkies", selkiesArgs(k, n)...)
			c.Env = append(withoutVar(s.env, "SELKIES_MASTER_TOKEN"), "SELKIES_MASTER_TOKEN="+tok)
			c.Dir = s.o.Home
			c.Stdout, c.Stderr = os.Stderr, os.Stderr
			if err := c.Start(); err != nil {
				s.log.Error("start selkies", "err", err)
				next = time.Now().Add(backoff)
				continue
			}
			cmd, exited, running, healthy = c, make(chan struct{}), tokenHash(tok), false
			go func(c *exec.Cmd, e chan struct{}) { c.Wait(); close(e) }(c, exited)
			s.log.Info("selkies started", "port", SelkiesBase+n, "pid", c.Process.Pid)
		}
		if cmd != nil && !healthy && selkiesHealthy(SelkiesBase+n) == nil {
			healthy = true
			backoff = 500 * time.Millisecond
			r := selkiesRecord{Port: SelkiesBase + n, PID: cmd.Process.Pid, TokenHash: running}
			b, _ := json.Marshal(r)
			tmp := selkiesPath(dir, k) + ".new"
			if err := os.WriteFile(tmp, b, 0o600); err == nil {
				os.Rename(tmp, selkiesPath(dir, k))
			}
			s.log.Info("selkies ready", "port", r.Port)
		}
	}
}
