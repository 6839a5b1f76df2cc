package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store/pg/pgtest"
)

// proc is a running froogd.
type proc struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr syncbuf.Buffer
}

// killIn kills every process whose working folder is in dir, and says
// how many.
func killIn(dir string) (n int) {
	cwds, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, f := range cwds {
		at, err := os.Readlink(f)
		if err != nil || at != dir && !strings.HasPrefix(at, dir+string(filepath.Separator)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// start runs froogd with args and waits for the line matching re.
func start(t *testing.T, re *regexp.Regexp, args ...string) (*proc, []string) {
	t.Helper()
	return startCmd(t, re, exec.Command(froogd, args...), args)
}

// startCmd is start with the command that runs froogd given.
func startCmd(t *testing.T, re *regexp.Regexp, cmd *exec.Cmd, args []string) (*proc, []string) {
	t.Helper()
	p := &proc{cmd: cmd}
	// A desktop a link starts opens no browser window unless the test
	// asks (FROOG_DESKTOP_BROWSER=true in its env, which comes later and
	// wins): the desktop tests look at the screen's pixels.
	if p.cmd.Env == nil {
		p.cmd.Env = os.Environ()
	}
	p.cmd.Env = append([]string{"FROOG_DESKTOP_BROWSER=false"}, p.cmd.Env...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Gracefully first: froogd dev's local driver ends its sandboxes'
		// processes (jobs outlive a killed froogd, as they outlive SSH).
		if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
			done := make(chan struct{})
			go func() { p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				p.cmd.Process.Kill()
				<-done
				// Its sandboxes' jobs outlive a killed froogd: they run in
				// its data folder.
				if i := slices.Index(args, "--data"); i >= 0 && i+1 < len(args) {
					t.Logf("froogd %s did not stop within 15 s of SIGTERM: killed, and the processes in %s: %d", args[0], args[i+1], killIn(args[i+1]))
				}
			}
		}
		checkNoSecrets(t, "froogd "+args[0], p.stderr.String())
	})
	lines := make(chan []string, 1)
	go func() {
		var seen string // the output so far: re may span lines
		for {
			line, err := p.stdout.ReadString('\n')
			seen += line
			if m := re.FindStringSubmatch(seen); m != nil {
				lines <- m
				io.Copy(io.Discard, p.stdout)
				return
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	select {
	case m, ok := <-lines:
		if !ok {
			p.cmd.Wait()
			t.Fatalf("froogd %v exited: %s", args, p.stderr.String())
		}
		return p, m
	case <-time.After(30 * time.Second):
		t.Fatalf("froogd %v did not start: %s", args, p.stderr.String())
	}
	return nil, nil
}

// secretRE matches what must never be in a log line: URL, viewer and
// desktop-link tokens and API keys (froog_ followed by the key's secret).
var secretRE = regexp.MustCompile(`\b(pt|pvt|dt)_[A-Za-z0-9_-]{40,}|\bfroog_[A-Za-z0-9_-]{40,}`)

// checkNoSecrets fails t when the log of the command who (a froogd's, or
// the froog CLI's stderr) holds a secret. Every test that runs the
// binaries goes through it, so every log line the end-to-end suites
// produce is checked against every token they used.
func checkNoSecrets(t *testing.T, who, log string) {
	if m := secretRE.FindAllString(log, 3); m != nil {
		t.Errorf("%s logged secrets %q", who, m)
	}
}

// stop ends p with SIGTERM and checks it exits cleanly.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.exitsClean(t, p.term(), 20*time.Second)
}

// term sends p SIGTERM; its exit comes on the channel.
func (p *proc) term() <-chan error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	return done
}

// exitsClean checks that p, sent SIGTERM (term), exits cleanly within d.
func (p *proc) exitsClean(t *testing.T, exited <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("froogd exited with %v: %s", err, p.stderr.String())
		}
	case <-time.After(d):
		t.Fatalf("froogd still runs %v after SIGTERM", d)
	}
}

type client struct {
	t    *testing.T
	base string
	key  string
}

func (c client) call(method, path string, body string, want int, out any) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	// http.DefaultTransport checks the answer against the OpenAPI
	// document (contract_test.go): one that breaks it is an error here.
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		c.t.Fatalf("%s %s: got %d, want %d: %s", method, path, res.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

var devReady = regexp.MustCompile(`API:\s+(http://\S+)/v1`)

// froogdRun runs froogd with args to its end and returns what it printed,
// trimmed; the test fails if froogd does.
func froogdRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(froogd, args...).Output()
	if err != nil {
		t.Fatalf("froogd %v: %v", args[:min(2, len(args))], err)
	}
	return strings.TrimSpace(string(out))
}

// adminAccount makes an account with froogd admin create-account (flags
// are that command's) and an admin key for it, as an operator would, and
// returns the key; where names the store: --data DIR or --database-url URL.
func adminAccount(t testing.TB, where []string, flags ...string) (key string) {
	t.Helper()
	acct := froogdRun(t, append(append([]string{"admin", "create-account"}, flags...), where...)...)
	return froogdRun(t, append([]string{"admin", "api-key", "create", "--account", acct, "--preset", "admin"}, where...)...)
}

// writeControlKey writes a new control-plane SSH key and returns its path.
func writeControlKey(t *testing.T) string {
	t.Helper()
	_, pemBytes := testkit.NewKeyPEM(t)
	path := filepath.Join(t.TempDir(), "control_key")
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// edgeClient reaches the edge at addr for every host, trusting the local
// CA in caFile.
func edgeClient(t *testing.T, addr, caFile string, h2 bool) *http.Client {
	return edgeClientWith(addr, caPool(t, caFile), h2)
}

// caPool is the pool of one PEM file's certificates (the local CA's).
func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return pool
}

// edgeClientWith reaches the edge at addr for every host, trusting pool.
func edgeClientWith(addr string, pool *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, n, addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func visit(t *testing.T, c *http.Client, method, u string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, strings.Split(u, "?")[0], err) // a query may hold a token
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// selfHosted prepares what an operator does before starting froogd on
// Postgres: a migrated database (a schema of its own), an account with an
// admin key, a control-plane key and a secret key. It returns the
// database URL, the API key and the two key files.
func selfHosted(t *testing.T) (db, key, ctlKey, secret string) {
	t.Helper()
	return selfHostedOn(t, pgtest.URLWithSchema(pgtest.Schema(t)))
}

// selfHostedOn is selfHosted on the empty database at db.
func selfHostedOn(t *testing.T, db string) (_, key, ctlKey, secret string) {
	t.Helper()
	froogdRun(t, "migrate", "--database-url", db)
	key = adminAccount(t, []string{"--database-url", db}, "--name", "acme")
	ctlKey = writeControlKey(t)
	secret = filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(secret, bytes.Repeat([]byte{9}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	return db, key, ctlKey, secret
}

// devOptions are what a test asks of its froogd dev; the zero value is
// froogd dev on free loopback ports with its edge under froog.test.
type devOptions struct {
	// args are more flags for froogd dev (--rate-limit 0, --capacity 100).
	args []string
	// env is more of froogd's environment (NAME=value), after the test's.
	env []string
	// clock starts froogd with its clock read from a test clock file
	// (clockFile), which dev.advance moves.
	clock bool
	// prepare, when set, runs on the data folder before froogd starts
	// (froogd admin on the embedded store: accounts, keys). A key it
	// returns is the one dev.c uses, written as the folder's api-key;
	// with "" dev.c uses the key froogd dev makes.
	prepare func(data string) (key string)
}

// dev is a running froogd dev: its process, the API client with the
// account's key, the edge's address, the local CA and the data folder.
type dev struct {
	p      *proc
	c      client
	data   string
	edge   string // the edge's HTTPS address
	caFile string
	pool   *x509.CertPool // the local CA
	clock  string         // the test clock's file (devOptions.clock)
	offset atomic.Int64   // how far advance has moved the clock
}

var devEdgeReady = regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `)

// startDev starts froogd dev with o and waits until its API and edge
// listen. It is the one way the end-to-end tests start froogd dev.
func startDev(t *testing.T, o devOptions) *dev {
	t.Helper()
	d := &dev{data: t.TempDir()}
	key := ""
	if o.prepare != nil {
		key = o.prepare(d.data)
	}
	if key != "" {
		if err := os.WriteFile(filepath.Join(d.data, "api-key"), []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"dev", "--data", d.data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0",
		"--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test"}, o.args...)
	cmd := exec.Command(froogd, args...)
	env := o.env
	if o.clock {
		d.clock = clockFile(t)
		env = append(env, "FROOG_TEST_CLOCK_FILE="+d.clock)
	}
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	p, m := startCmd(t, devEdgeReady, cmd, args)
	if key == "" {
		b, _ := os.ReadFile(filepath.Join(d.data, "api-key"))
		key = strings.TrimSpace(string(b))
	}
	d.p, d.c, d.edge, d.caFile = p, client{t: t, base: m[1], key: key}, m[2], filepath.Join(d.data, "ca.pem")
	d.pool = caPool(t, d.caFile)
	return d
}

// web is a client that reaches d's edge for every host, trusting its CA.
func (d *dev) web(h2 bool) *http.Client { return edgeClientWith(d.edge, d.pool, h2) }

// advance moves d's test clock (every role of the froogd) by delta.
func (d *dev) advance(t *testing.T, delta time.Duration) {
	t.Helper()
	if d.clock == "" {
		t.Fatal("advance: froogd dev started without devOptions.clock")
	}
	off := time.Duration(d.offset.Add(int64(delta)))
	if err := os.WriteFile(d.clock, []byte(off.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// cli is the froog CLI as its user runs it: HOME a folder of its own
// (the config file froog login writes is there) and nothing of FROOG_*
// from the test's environment. Links and keys go to stdout when asked
// for, never to stderr: every run's stderr goes through checkNoSecrets.
type cli struct {
	home string
}

// newCLI is a froog CLI with a home folder of its own.
func newCLI(t *testing.T) *cli { return &cli{home: t.TempDir()} }

// run runs froog with stdin and args and returns what it printed and its
// exit code.
func (c *cli) run(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return c.runEnv(t, nil, stdin, args...)
}

// runEnv is run with env (NAME=value) added to the environment.
func (c *cli) runEnv(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(froogCLI, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FROOG_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "HOME="+c.home), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	checkNoSecrets(t, "froog "+args[0], e.String())
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("froog %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// ok is run for a command that must succeed; it returns stdout, trimmed.
func (c *cli) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := c.run(t, "", args...)
	if code != 0 {
		t.Fatalf("froog %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return strings.TrimSpace(out)
}

// login logs c in to d's API with d's key, on stdin.
func (c *cli) login(t *testing.T, d *dev) {
	t.Helper()
	if _, errOut, code := c.run(t, d.c.key+"\n", "login", "--url", d.c.base); code != 0 {
		t.Fatalf("login: %s", errOut)
	}
}

// keep writes a test artefact (a screenshot) to $FROOG_ARTEFACTS/desktop,
// or else to the repository's .artefacts/desktop (ignored by git): every
// end-to-end test keeps its artefacts there.
func keep(t *testing.T, name string, b []byte) {
	dir := os.Getenv("FROOG_ARTEFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".artefacts")
	}
	dir = filepath.Join(dir, "desktop")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("artefacts: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Errorf("artefacts: %v", err)
	}
}

// runsWithin waits until sandbox name runs, with no restore under way.
func runsWithin(t *testing.T, c client, name string, within time.Duration) {
	t.Helper()
	var sb struct {
		State, Error string
		RestoreFrom  string `json:"restore_from"`
	}
	if !wait.Until(within, func() bool {
		sb.RestoreFrom = "" // omitted once done
		c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
		return sb.State == "running" && sb.RestoreFrom == "" || sb.State == "error"
	}) || sb.State != "running" {
		t.Fatalf("%s never ran: %+v", name, sb)
	}
}

// newSandbox creates sandbox name and waits until it runs.
func newSandbox(t *testing.T, c client, name string, within time.Duration) {
	t.Helper()
	c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
	runsWithin(t, c, name, within)
}
