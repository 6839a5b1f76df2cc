package guest

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// fakeSelkiesScript stands in for the selkies program (which cannot be
// installed here: its Python registry is not reachable): it answers
// /api/health on --addr and --port as Selkies does, and appends to
// $FAKE_SELKIES_LOG one JSON line with its arguments, its DISPLAY and the
// SHA-256 of the SELKIES_MASTER_TOKEN it was given.
const fakeSelkiesScript = `#!/usr/bin/env python3
import hashlib, http.server, json, os, sys
args = sys.argv[1:]
opt = lambda n: [a.split('=', 1)[1] for a in args if a.startswith('--' + n + '=')][0]
with open(os.environ['FAKE_SELKIES_LOG'], 'a') as f:
    f.write(json.dumps({'args': args, 'display': os.environ.get('DISPLAY', ''),
        'token_sha256': hashlib.sha256(os.environ.get('SELKIES_MASTER_TOKEN', '').encode()).hexdigest()}) + '\n')
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == '/api/health' else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer((opt('addr'), int(opt('port'))), H).serve_forever()
`

type fakeSelkiesRun struct {
	Args        []string `json:"args"`
	Display     string   `json:"display"`
	TokenSHA256 string   `json:"token_sha256"`
}

func readRuns(t *testing.T, path string) []fakeSelkiesRun {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var runs []fakeSelkiesRun
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r fakeSelkiesRun
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("fake selkies log: %v", err)
		}
		runs = append(runs, r)
	}
	return runs
}

// Where selkies is installed, start --selkies-token-stdin runs it in
// websocket mode on 127.0.0.1 with the token in its environment (not its
// arguments), reports "transport":"selkies" and its port, and status
// agrees; a new token restarts it with that token.
func TestSelkiesStarted(t *testing.T) {
	needXvnc(t)
	if !have("python3") {
		testdep.Missing(t, "python3 is not installed")
	}
	home, bin := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "selkies"), []byte(fakeSelkiesScript), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "selkies.log")
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "FAKE_SELKIES_LOG=" + logPath}
	t.Cleanup(func() { cliIn(t, home, "", env, "stop") })

	tokA, tokB := strings.Repeat("a", 43), strings.Repeat("B", 43)
	out, errs, code := cliIn(t, home, tokA+"\n", env, "start", "--selkies-token-stdin")
	if code != 0 {
		t.Fatalf("start: exit %d: %s", code, errs)
	}
	st := parseState(t, out)
	n := st.VNCPort - VNCBase
	if st.Transport != TransportSelkies || st.SelkiesPort != SelkiesBase+n {
		t.Fatalf("start printed %+v; want transport selkies on port %d", st, SelkiesBase+n)
	}
	runs := readRuns(t, logPath)
	if len(runs) != 1 {
		t.Fatalf("selkies ran %d times", len(runs))
	}
	r := runs[0]
	for _, a := range []string{"--mode=websockets", "--addr=127.0.0.1", "--port=" + strconv.Itoa(SelkiesBase+n), "--enable-basic-auth=false"} {
		if !slices.Contains(r.Args, a) {
			t.Errorf("selkies args %q lack %s", r.Args, a)
		}
	}
	if strings.Contains(strings.Join(r.Args, " "), tokA) {
		t.Errorf("the token is on selkies' command line")
	}
	if r.TokenSHA256 != tokenHash(tokA) || r.Display != st.Display {
		t.Errorf("selkies got token hash %s and display %q; want the token's and %s", r.TokenSHA256, r.Display, st.Display)
	}
	if fi, err := os.Stat(tokenPath(StateDir(home, ""), KindDesktop)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v", fi, err)
	}
	if out, _, code := cliIn(t, home, "", env, "status"); code != 0 || parseState(t, out) != st {
		t.Errorf("status: exit %d, %q; want %+v", code, out, st)
	}

	// The same token again: nothing restarts. Another: selkies restarts with it.
	if out, _, _ := cliIn(t, home, tokA+"\n", env, "start", "--selkies-token-stdin"); parseState(t, out) != st {
		t.Errorf("second start printed %s", out)
	}
	if out, _, _ := cliIn(t, home, tokB+"\n", env, "start", "--selkies-token-stdin"); parseState(t, out) != st {
		t.Errorf("start with a new token printed %s", out)
	}
	runs = readRuns(t, logPath)
	if len(runs) != 2 || runs[1].TokenSHA256 != tokenHash(tokB) {
		t.Errorf("after a new token selkies ran %d times, last with %v", len(runs), runs[len(runs)-1].TokenSHA256)
	}

	// stop ends selkies with the rest: its port is free.
	if _, errs, code := cliIn(t, home, "", env, "stop"); code != 0 {
		t.Fatalf("stop: %s", errs)
	}
	wait.For(t, 10*time.Second, "selkies to end", func() bool { return selkiesHealthy(SelkiesBase+n) != nil })
}

// Where selkies is not installed, start with a token is VNC, at once; a
// malformed token is bad usage and starts nothing.
func TestSelkiesNotInstalled(t *testing.T) {
	needXvnc(t)
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH")}
	if have("selkies") {
		t.Skip("selkies is installed here")
	}
	t.Cleanup(func() { cliIn(t, home, "", env, "stop") })
	if _, errs, code := cliIn(t, home, "short\n", env, "start", "--selkies-token-stdin"); code != ExitUsage || !strings.Contains(errs, "selkies token") {
		t.Errorf("a bad token: exit %d, %q", code, errs)
	}
	if _, _, code := cliIn(t, home, "", env, "status"); code != ExitNotRunning {
		t.Errorf("a bad token started something: status exit %d", code)
	}
	began := time.Now()
	out, errs, code := cliIn(t, home, strings.Repeat("t", 43)+"\n", env, "start", "--selkies-token-stdin")
	if code != 0 {
		t.Fatalf("start: exit %d: %s", code, errs)
	}
	st := parseState(t, out)
	if st.Transport != TransportVNC || st.SelkiesPort != 0 || !st.Running {
		t.Errorf("start printed %+v; want transport vnc", st)
	}
	if d := time.Since(began); d > selkiesStartTimeout/2 {
		t.Errorf("start waited %v for a selkies that is not installed", d)
	}
}

func TestReadSelkiesToken(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{strings.Repeat("a", 43) + "\n", true},
		{strings.Repeat("a", 43), true},
		{strings.Repeat("a", 43) + "\r\n", true},
		{"aaaa-bbbb_cccc-dd", true},
		{"", false},
		{"\n", false},
		{"short", false},
		{strings.Repeat("a", 257), false},
		{strings.Repeat("a", 20) + " x", false},
		{strings.Repeat("a", 20) + "\nmore", false},
		{strings.Repeat("a", 20) + "$(reboot)", false},
	} {
		if _, err := ReadSelkiesToken(strings.NewReader(c.in)); (err == nil) != c.ok {
			t.Errorf("ReadSelkiesToken(%q): %v", c.in, err)
		}
	}
}

// Whatever is on stdin, a token read is 16 to 256 base64url characters.
func FuzzReadSelkiesToken(f *testing.F) {
	f.Add(strings.Repeat("a", 43) + "\n")
	f.Add("short")
	f.Add("aaaaaaaaaaaaaaaaaaaa\n$(x)")
	f.Fuzz(func(t *testing.T, in string) {
		tok, err := ReadSelkiesToken(strings.NewReader(in))
		if err != nil {
			return
		}
		if len(tok) < 16 || len(tok) > 256 || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			t.Fatalf("%q read as %q", in, tok)
		}
	})
}
