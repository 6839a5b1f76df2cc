package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// The binaries under test: this package's froog and froogd, built once.
var froogBin, froogdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "froog-cli-test")
	if err != nil {
		panic(err)
	}
	froogBin, froogdBin = filepath.Join(dir, "froog"), filepath.Join(dir, "froogd")
	for _, b := range []struct{ out, pkg string }{{froogBin, "."}, {froogdBin, "../froogd"}} {
		if out, err := exec.Command("go", "build", "-race", "-o", b.out, b.pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// secretRE matches the secrets froog hands out: none may reach a log.
var secretRE = regexp.MustCompile(`\b(pt|pvt|dt)_[A-Za-z0-9_-]{40,}|\bfroog_[A-Za-z0-9_-]{40,}`)

// dev is a running froogd dev and a home folder for the froog CLI.
type dev struct {
	api, edge, data, home string
}

// startDev runs froogd dev on loopback ports until the test ends, then
// checks that its log holds no secret.
func startDev(t *testing.T) *dev {
	t.Helper()
	testdep.Short(t, "runs froogd dev and the CLI end to end")
	d := &dev{data: t.TempDir(), home: t.TempDir()}
	cmd := exec.Command(froogdBin, "dev", "--data", d.data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0",
		"--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if s := secretRE.FindString(stderr.String()); s != "" {
			t.Errorf("froogd's log holds a secret: %.12s…", s)
		}
	})
	banner := regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `)
	found := make(chan []string, 1)
	go func() {
		r := bufio.NewReader(out)
		var seen string
		for {
			line, err := r.ReadString('\n')
			seen += line
			if m := banner.FindStringSubmatch(seen); m != nil {
				found <- m
				io.Copy(io.Discard, r)
				return
			}
			if err != nil {
				close(found)
				return
			}
		}
	}()
	select {
	case m, ok := <-found:
		if !ok {
			t.Fatalf("froogd dev exited: %s", stderr.String())
		}
		d.api, d.edge = m[1], m[2]
	case <-time.After(60 * time.Second):
		t.Fatalf("froogd dev did not start: %s", stderr.String())
	}
	return d
}

// run is the froog CLI with args, stdin and HOME=d.home (its config file
// there) and nothing of FROOG_* from the test's environment.
func (d *dev) run(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return d.runEnv(t, nil, stdin, args...)
}

// runEnv is run with env (KEY=VALUE) added.
func (d *dev) runEnv(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(froogBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FROOG_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "HOME="+d.home), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	// Links and keys go to stdout when asked for; never to stderr.
	if s := secretRE.FindString(e.String()); s != "" {
		t.Errorf("froog %s wrote a secret to stderr: %.12s…", args[0], s)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("froog %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// ok is run for a command that must succeed; it returns stdout, trimmed.
func (d *dev) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := d.run(t, "", args...)
	if code != 0 {
		t.Fatalf("froog %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return strings.TrimSpace(out)
}

// web is an HTTPS client that reaches froogd's edge for every host.
func (d *dev) web(t *testing.T) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(d.data, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, n, d.edge)
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", strings.Split(u, "?")[0], err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// tokenOf is the _token of a URL froog printed.
func tokenOf(t *testing.T, link string) string {
	t.Helper()
	_, tok, ok := strings.Cut(link, "?_token=")
	if !ok {
		t.Fatalf("%.60s… has no _token", link)
	}
	return tok
}

// The docs' sections through the froog binary against froogd dev: login,
// Public URLs, A token per viewer, Background commands, Snapshots & forks
// and Desktop → Links, each on its own sandbox, checking what froog
// prints and its exit codes.
func TestCLIWalkthrough(t *testing.T) {
	t.Parallel()
	d := startDev(t)
	key, err := os.ReadFile(filepath.Join(d.data, "api-key"))
	if err != nil {
		t.Fatal(err)
	}

	// Before login: a clear error. Login: the key on stdin, checked, saved.
	if _, errOut, code := d.run(t, "", "list"); code != 1 || !strings.Contains(errOut, "froog login") {
		t.Fatalf("list before login: exit %d: %s", code, errOut)
	}
	if out, errOut, code := d.run(t, "", "status", "--check"); code != 1 || !strings.Contains(errOut, "froog login") || !strings.Contains(out, "key:    not set") {
		t.Fatalf("status --check before login: exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code := d.run(t, "froog_wrong\n", "login", "--url", d.api); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("login with a wrong key: exit %d: %s", code, errOut)
	}
	if out, errOut, code := d.run(t, string(key), "login", "--url", d.api+"/v1"); code != 0 || secretRE.MatchString(out+errOut) {
		t.Fatalf("login: exit %d: %s %s", code, out, errOut)
	}
	cfg := filepath.Join(d.home, ".config", "froog", "config.json")
	if st, err := os.Stat(cfg); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v, want mode 600", st, err)
	}

	// status says where the key comes from (never the key) and that the
	// API answers; --check fails when it does not.
	if out := d.ok(t, "status", "--check"); !strings.Contains(out, d.api+"/v1 (answers)") || !strings.Contains(out, "key:    the config file") ||
		!strings.Contains(out, cfg) || strings.Contains(out, strings.TrimSpace(string(key))) {
		t.Fatalf("status --check after login: %s", out)
	}
	if out, errOut, code := d.runEnv(t, []string{"FROOG_API_URL=http://127.0.0.1:1"}, "", "status", "--check"); code != 1 || !strings.Contains(errOut, "connection refused") || !strings.Contains(out, "does not answer") {
		t.Fatalf("status --check with no API there: exit %d: %s%s", code, out, errOut)
	}

	// FROOG_API_KEY and FROOG_API_URL override the file.
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"FROOG_API_KEY=froog_wrong", "401"},
		{"FROOG_API_URL=http://127.0.0.1:1", "connection refused"},
	} {
		if _, errOut, code := d.runEnv(t, []string{tc.env}, "", "list"); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("list with %s: exit %d: %s", tc.env, code, errOut)
		}
	}
	if _, errOut, code := d.runEnv(t, []string{"FROOG_API_KEY=" + strings.TrimSpace(string(key)), "FROOG_API_URL=" + d.api}, "", "list"); code != 0 {
		t.Fatalf("list with the environment's key and URL: exit %d: %s", code, errOut)
	}

	// Errors: the API's code, message and request id, exit 1.
	if _, errOut, code := d.run(t, "", "info", "nope"); code != 1 || !regexp.MustCompile(`404 not_found: .*\(request \S+\)`).MatchString(errOut) {
		t.Fatalf("info nope: exit %d: %q", code, errOut)
	}
	if _, errOut, code := d.run(t, "", "new", "bad", "--ttl", "soon", "--host", "x"); code != 1 || !strings.Contains(errOut, "--ttl") || !strings.Contains(errOut, "--host") {
		t.Fatalf("new with two bad flags: exit %d: %q, want both named", code, errOut)
	}

	for _, name := range []string{"web", "jobs", "snap", "desk", "files"} {
		if got := d.ok(t, "new", name); got != name {
			t.Fatalf("froog new %s printed %q", name, got)
		}
	}
	if got := d.ok(t, "status", "web"); !strings.Contains(got, "name: web\n") || !strings.Contains(got, "state: running") {
		t.Fatalf("status web: %s", got)
	}
	var listed []struct{ Name, State string }
	if err := json.Unmarshal([]byte(d.ok(t, "list", "--json")), &listed); err != nil || len(listed) != 5 || listed[0].State != "running" {
		t.Fatalf("list --json: %v %+v", err, listed)
	}
	// A URL from the start, labels and settings on new.
	pre := d.ok(t, "new", "preview", "--ttl", "15m", "--auto-start", "--host", "3000:public", "--host", "3001", "--label", "team=web", "-e", "TENANT=42",
		"--os", "debian", "--max-lifetime", "2h", "--delete-after", "1d")
	if !regexp.MustCompile(`^preview\nhttps://preview-3000-[a-z0-9]{6}\.froog\.test/\nhttps://preview-3001-[a-z0-9]{6}\.froog\.test/\?_token=pt_\S+$`).MatchString(pre) {
		t.Fatalf("new --host printed %q", pre)
	}
	var info struct {
		AutoStart       bool              `json:"auto_start"`
		TTLSecs         int               `json:"ttl_secs"`
		Labels          map[string]string `json:"labels"`
		OS              string            `json:"os"`
		MaxLifetimeSecs int               `json:"max_lifetime_secs"`
		DeleteAfterSecs int               `json:"delete_after_secs"`
	}
	if err := json.Unmarshal([]byte(d.ok(t, "info", "preview", "--json")), &info); err != nil || !info.AutoStart || info.TTLSecs != 900 || info.Labels["team"] != "web" ||
		info.OS != "debian-13" || info.MaxLifetimeSecs != 7200 || info.DeleteAfterSecs != 86400 {
		t.Fatalf("info --json: %v %+v", err, info)
	}
	if got := d.ok(t, "exec", "preview", "--", "echo $TENANT"); got != "42" {
		t.Fatalf("-e on new: %q", got)
	}
	if got := d.ok(t, "list", "--label", "team=web"); !strings.Contains(got, "preview") || strings.Contains(got, "jobs") {
		t.Fatalf("list --label team=web: %s", got)
	}

	t.Run("public URLs and viewer tokens", func(t *testing.T) {
		t.Parallel()
		web := d.web(t)
		port := loopback.FreePort(t)
		p := fmt.Sprint(port)
		job := d.ok(t, "exec", "web", "--detach", "--", fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port))
		if !strings.HasPrefix(job, "job_") {
			t.Fatalf("exec --detach printed %q, want a job id", job)
		}
		d.ok(t, "wait", "web", "--port", p, "--timeout", "30s")
		if _, errOut, code := d.run(t, "", "wait", "web", "--port", fmt.Sprint(loopback.FreePort(t)), "--timeout", "1s"); code != 1 || !strings.Contains(errOut, "nothing listens") {
			t.Fatalf("wait on a free port: exit %d: %s", code, errOut)
		}

		link := d.ok(t, "host", "web", p)
		if !regexp.MustCompile(`^https://web-` + p + `-[a-z0-9]{6}\.froog\.test/\?_token=pt_`).MatchString(link) {
			t.Fatalf("host printed %.60s…", link)
		}
		bare := strings.Split(link, "?")[0]
		if code, _ := get(t, web, bare); code != 401 {
			t.Fatalf("private URL without a token: %d", code)
		}
		if code, _ := get(t, web, link); code != 302 {
			t.Fatalf("the link: %d, want 302 to set the cookie", code)
		}
		if code, body := get(t, web, bare, "X-Froog-Url-Token", tokenOf(t, link)); code != 200 || !strings.Contains(body, "Directory listing") {
			t.Fatalf("with the token: %d %.80s", code, body)
		}

		// A token per viewer: works, is listed, and fails once revoked.
		var vt struct{ ID, URL, Label string }
		if err := json.Unmarshal([]byte(d.ok(t, "url-token", "create", "web", p, "--ttl", "2h", "--label", "alice", "--json")), &vt); err != nil || !strings.Contains(vt.URL, "?_token=pvt_") || !strings.HasPrefix(vt.ID, "utk_") {
			t.Fatalf("url-token create --json: %v %+v", err, vt.ID)
		}
		viewer := tokenOf(t, vt.URL)
		if code, _ := get(t, web, bare, "X-Froog-Url-Token", viewer); code != 200 {
			t.Fatalf("the viewer token: %d", code)
		}
		if list := d.ok(t, "url-token", "list", "web", p); !strings.Contains(list, vt.ID) || !strings.Contains(list, "alice") || strings.Contains(list, "pvt_") {
			t.Fatalf("url-token list: %s", list)
		}
		d.ok(t, "url-token", "revoke", "web", p, vt.ID)
		if code, _ := get(t, web, bare, "X-Froog-Url-Token", viewer); code != 401 {
			t.Fatalf("a revoked viewer token: %d, want 401", code)
		}
		if code, _ := get(t, web, bare, "X-Froog-Url-Token", tokenOf(t, link)); code != 200 {
			t.Fatalf("the URL's own token after a viewer's revoke: %d", code)
		}

		// --public drops the token; hosting again makes a new one.
		if pub := d.ok(t, "host", "web", p, "--public"); pub != bare {
			t.Fatalf("--public printed %q, want %q", pub, bare)
		}
		if code, _ := get(t, web, bare); code != 200 {
			t.Fatalf("public URL: %d", code)
		}
		if _, errOut, code := d.run(t, "", "url-token", "create", "web", p); code != 1 || !strings.Contains(errOut, "url_public") {
			t.Fatalf("a viewer token on a public URL: exit %d: %s", code, errOut)
		}
		again := d.ok(t, "host", "web", p)
		if tokenOf(t, again) == tokenOf(t, link) {
			t.Fatal("hosting again after --public kept the old token")
		}
		if code, _ := get(t, web, bare, "X-Froog-Url-Token", tokenOf(t, link)); code != 401 {
			t.Fatalf("the replaced token: %d, want 401", code)
		}

		// --title labels it in the list; --subdomain renames it; --rm removes it.
		d.ok(t, "host", "web", p, "--title", "API docs")
		if list := d.ok(t, "host", "web"); !strings.Contains(list, "API docs") || !strings.Contains(list, bare) {
			t.Fatalf("host list: %s", list)
		}
		renamed := d.ok(t, "host", "web", p, "--subdomain", "acme-demo")
		if !strings.HasPrefix(renamed, "https://acme-demo.froog.test/?_token=pt_") {
			t.Fatalf("--subdomain printed %.50s…", renamed)
		}
		if code, _ := get(t, web, bare, "X-Froog-Url-Token", tokenOf(t, renamed)); code != 404 {
			t.Fatalf("the old address after --subdomain: %d, want 404", code)
		}
		d.ok(t, "host", "web", p, "--rm")
		if list := d.ok(t, "host", "web", "--json"); list != "[]" {
			t.Fatalf("host list after --rm: %s", list)
		}
		d.ok(t, "kill", "web", job)
	})

	t.Run("background commands", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name     string
			args     []string
			stdin    string
			wantOut  string
			wantCode int
		}{
			{"output streamed", []string{"exec", "jobs", "--", "echo out; echo err >&2"}, "", "out\n", 0},
			{"false exits 1", []string{"exec", "jobs", "--", "false"}, "", "", 1},
			{"exit code passed through", []string{"exec", "jobs", "--", "exit 7"}, "", "", 7},
			{"past --timeout exits 124", []string{"exec", "jobs", "--timeout", "1s", "--", "sleep 30"}, "", "", 124},
			{"stdin", []string{"exec", "jobs", "--", "tr a-z A-Z"}, "shout\n", "SHOUT\n", 0},
			{"--no-stdin", []string{"exec", "jobs", "--no-stdin", "--", "cat; echo done"}, "not sent\n", "done\n", 0},
			{"--cwd and -e", []string{"exec", "jobs", "--cwd", "/tmp", "-e", "GREETING=hi", "--", "echo $GREETING; pwd"}, "", "hi\n/tmp\n", 0},
			{"--timeout 0 streams a job to its end", []string{"exec", "jobs", "--timeout", "0", "--", "echo streamed; exit 3"}, "", "streamed\n", 3},
		} {
			out, errOut, code := d.run(t, tc.stdin, tc.args...)
			if code != tc.wantCode || out != tc.wantOut {
				t.Errorf("%s: exit %d, stdout %q (stderr %q); want exit %d, %q", tc.name, code, out, errOut, tc.wantCode, tc.wantOut)
			}
		}
		if _, errOut, _ := d.run(t, "", "exec", "jobs", "--", "echo err >&2"); errOut != "err\n" {
			t.Errorf("stderr: %q", errOut)
		}

		job := d.ok(t, "exec", "jobs", "--detach", "--", "echo one; sleep 1; echo two; exit 4")
		if !regexp.MustCompile(`^job_[0-9a-f]+$`).MatchString(job) {
			t.Fatalf("--detach printed %q", job)
		}
		if out, _, code := d.run(t, "", "logs", "jobs", job, "-f"); code != 4 || out != "one\ntwo\n" {
			t.Fatalf("logs -f: exit %d, %q; want exit 4, one and two", code, out)
		}
		if out := d.ok(t, "logs", "jobs", job); out != "one\ntwo" {
			t.Fatalf("logs: %q", out)
		}
		long := d.ok(t, "exec", "jobs", "--detach", "--", "sleep 300")
		d.ok(t, "kill", "jobs", long)
		wait.For(t, 20*time.Second, "the killed job to show as killed", func() bool {
			list := d.ok(t, "jobs", "jobs")
			return regexp.MustCompile(long+`\s+killed`).MatchString(list) && regexp.MustCompile(job+`\s+exited\s+4`).MatchString(list)
		})

		// metrics and ps read the running sandbox (this host's /proc
		// under the local driver).
		if out := d.ok(t, "metrics", "jobs"); !regexp.MustCompile(`^cpu [0-9.]+% of \d+ vCPU\nmemory [0-9.]+ GB of [0-9.]+ GB \(\d+%\)\ndisk `).MatchString(out) {
			t.Errorf("metrics: %q", out)
		}
		var m struct {
			CPUCount int `json:"cpu_count"`
		}
		if err := json.Unmarshal([]byte(d.ok(t, "metrics", "jobs", "--json")), &m); err != nil || m.CPUCount < 1 {
			t.Errorf("metrics --json: %+v, %v", m, err)
		}
		if out := d.ok(t, "ps", "jobs"); !strings.HasPrefix(out, "PID ") || !strings.Contains(out, "COMMAND") || strings.Count(out, "\n") < 1 {
			t.Errorf("ps: %q", out)
		}
	})

	t.Run("snapshots and forks", func(t *testing.T) {
		t.Parallel()
		d.ok(t, "exec", "snap", "--", "echo v1 > version")
		snap := d.ok(t, "snapshot", "snap", "--name", "before-upgrade")
		if !strings.HasPrefix(snap, "snap_") {
			t.Fatalf("snapshot printed %q", snap)
		}
		wait.For(t, 60*time.Second, "the saved snapshot to be available", func() bool {
			var list []struct{ Name, Status string }
			json.Unmarshal([]byte(d.ok(t, "snapshots", "snap", "--json")), &list)
			for _, s := range list {
				if s.Name == "before-upgrade" && s.Status == "available" {
					return true
				}
			}
			return false
		})
		if saved := d.ok(t, "snapshots"); !strings.Contains(saved, "before-upgrade") {
			t.Fatalf("snapshots (saved): %s", saved)
		}
		d.ok(t, "exec", "snap", "--", "echo v2 > version")
		if got := d.ok(t, "fork", "snap@before-upgrade", "snap-2"); got != "snap-2" {
			t.Fatalf("fork printed %q", got)
		}
		if got := d.ok(t, "exec", "snap-2", "--", "cat version"); got != "v1" {
			t.Fatalf("the fork from the snapshot has %q, want v1", got)
		}
		d.ok(t, "delete", "snap-2", "-y") // the account runs 10 at once
		// A fork's own timer and variables, on top of the source's.
		if got := d.ok(t, "fork", "snap", "snap-env", "--ttl", "15m", "-e", "GREETING=forked"); got != "snap-env" {
			t.Fatalf("fork --ttl -e printed %q", got)
		}
		var forked struct {
			TTLSecs int `json:"ttl_secs"`
		}
		if err := json.Unmarshal([]byte(d.ok(t, "info", "snap-env", "--json")), &forked); err != nil || forked.TTLSecs != 900 {
			t.Fatalf("fork --ttl 15m: %v ttl_secs %d, want 900", err, forked.TTLSecs)
		}
		if got := d.ok(t, "exec", "snap-env", "--", "echo $GREETING"); got != "forked" {
			t.Fatalf("fork -e: %q", got)
		}
		d.ok(t, "delete", "snap-env", "-y")
		if got := d.ok(t, "fork", "snap", "try", "--count", "2"); got != "try-1\ntry-2" {
			t.Fatalf("fork --count 2 printed %q", got)
		}
		if got := d.ok(t, "exec", "try-2", "--", "cat version"); got != "v2" {
			t.Fatalf("a fork of the sandbox has %q, want v2", got)
		}
		if got := d.ok(t, "restore", "snap@before-upgrade"); got != "snap running" {
			t.Fatalf("restore printed %q", got)
		}
		if got := d.ok(t, "exec", "snap", "--", "cat version"); got != "v1" {
			t.Fatalf("after restore: %q, want v1", got)
		}
		if _, errOut, code := d.run(t, "", "restore", "snap"); code != 1 || !strings.Contains(errOut, "NAME@SNAPSHOT") {
			t.Fatalf("restore without a snapshot: exit %d: %s", code, errOut)
		}
		// A saved snapshot is a template for new; --all lists every
		// snapshot, and --rm removes a saved one.
		if got := d.ok(t, "new", "from-saved", "--from", "before-upgrade"); got != "from-saved" {
			t.Fatalf("new --from printed %q", got)
		}
		if got := d.ok(t, "exec", "from-saved", "--", "cat version"); got != "v1" {
			t.Fatalf("new --from before-upgrade has %q, want v1", got)
		}
		if all := d.ok(t, "snapshots", "--all"); !strings.Contains(all, "before-upgrade") || !strings.Contains(all, "snap") {
			t.Fatalf("snapshots --all: %s", all)
		}
		d.ok(t, "snapshots", "--rm", "before-upgrade")
		if saved := d.ok(t, "snapshots"); strings.Contains(saved, "before-upgrade") {
			t.Fatalf("snapshots after --rm: %s", saved)
		}

		// --delete removes one snapshot of the sandbox.
		extra := strings.Fields(d.ok(t, "snapshot", "snap"))[0]
		if got := d.ok(t, "snapshot", "snap", "--delete", extra); got != extra+" deleted" {
			t.Fatalf("snapshot --delete printed %q", got)
		}
		if list := d.ok(t, "snapshots", "snap", "--json"); strings.Contains(list, extra) {
			t.Fatalf("snapshot %s is still listed after --delete: %s", extra, list)
		}
		d.ok(t, "delete", "try-1", "-y")
		if got := d.ok(t, "list", "--prefix", "try"); strings.Contains(got, "try-1") || !strings.Contains(got, "try-2") {
			t.Fatalf("list --prefix try after delete: %s", got)
		}
	})

	t.Run("push, scp and ssh", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "app")
		for f, body := range map[string]string{"a.txt": "a", "sub/b.txt": "b", "node_modules/x/y.js": "junk", "build/out": "junk"} {
			p := filepath.Join(dir, filepath.FromSlash(f))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := d.ok(t, "push", "files", dir); !strings.HasPrefix(got, "2 files to files:") {
			t.Fatalf("push printed %q", got)
		}
		if got := d.ok(t, "exec", "files", "--", "cd app && find . -type f | sort && cat sub/b.txt"); got != "./a.txt\n./sub/b.txt\nb" {
			t.Fatalf("after push: %q, want a.txt and sub/b.txt without build outputs", got)
		}
		d.ok(t, "push", "files", dir, "--to", "src/api")
		if got := d.ok(t, "exec", "files", "--", "cat src/api/a.txt"); got != "a" {
			t.Fatalf("push --to: %q", got)
		}

		local := filepath.Join(t.TempDir(), "up.sh")
		os.WriteFile(local, []byte("echo run\n"), 0o755)
		d.ok(t, "scp", local, "files:bin/")
		if got := d.ok(t, "exec", "files", "--", "bin/up.sh"); got != "run" {
			t.Fatalf("scp up (mode kept): %q", got)
		}
		down := t.TempDir()
		d.ok(t, "scp", "files:app/sub/b.txt", down)
		if b, err := os.ReadFile(filepath.Join(down, "b.txt")); err != nil || string(b) != "b" {
			t.Fatalf("scp down: %q %v", b, err)
		}
		if _, errOut, code := d.run(t, "", "scp", "files:nope.txt", down); code != 1 || !strings.Contains(errOut, "404") {
			t.Fatalf("scp of a missing file: exit %d: %s", code, errOut)
		}

		// ssh checks the host key the API gives (recorded in froog's own
		// known-hosts file): without an account key it gets as far as
		// authentication, never to a host-key failure.
		if _, err := exec.LookPath("ssh"); err != nil {
			testdep.Missing(t, "no ssh client")
		}
		_, errOut, code := d.run(t, "", "ssh", "files", "--", "true")
		if code != 255 || !strings.Contains(errOut, "Permission denied") || strings.Contains(errOut, "Host key verification failed") {
			t.Fatalf("ssh without a key: exit %d: %s", code, errOut)
		}
		if b, err := os.ReadFile(filepath.Join(d.home, ".config", "froog", "known_hosts")); err != nil || !strings.Contains(string(b), "ssh-ed25519 ") {
			t.Fatalf("froog's known_hosts: %q %v", b, err)
		}
	})

	t.Run("api keys", func(t *testing.T) {
		t.Parallel()
		var k struct {
			ID        string     `json:"id"`
			Key       string     `json:"key"`
			Actions   []string   `json:"actions"`
			ExpiresAt *time.Time `json:"expires_at"`
		}
		if err := json.Unmarshal([]byte(d.ok(t, "api-key", "create", "watcher", "--preset", "read-only", "--ttl", "never", "--json")), &k); err != nil ||
			!strings.HasPrefix(k.Key, "froog_") || k.ExpiresAt != nil || slices.Contains(k.Actions, "sandbox.create") {
			t.Fatalf("api-key create --preset read-only --ttl never: %v id %s, expires %v, actions %v", err, k.ID, k.ExpiresAt, k.Actions)
		}
		if list := d.ok(t, "api-key", "list"); !strings.Contains(list, k.ID) || !strings.Contains(list, "watcher") || strings.Contains(list, k.Key) {
			t.Fatalf("api-key list: %s", list)
		}
		as := func(key string, args ...string) (string, int) {
			_, errOut, code := d.runEnv(t, []string{"FROOG_API_KEY=" + key}, "", args...)
			return errOut, code
		}
		if errOut, code := as(k.Key, "list"); code != 0 {
			t.Fatalf("list with the read-only key: exit %d: %s", code, errOut)
		}
		if errOut, code := as(k.Key, "new", "nope"); code != 1 || !strings.Contains(errOut, "403 api_key_action_forbidden") {
			t.Fatalf("new with the read-only key: exit %d: %s", code, errOut)
		}
		rotated := d.ok(t, "api-key", "rotate", k.ID)
		if errOut, code := as(k.Key, "list"); code != 1 || !strings.Contains(errOut, "401") {
			t.Fatalf("the key before its rotate: exit %d: %s", code, errOut)
		}
		if errOut, code := as(rotated, "list"); code != 0 {
			t.Fatalf("the rotated key: exit %d: %s", code, errOut)
		}
		d.ok(t, "api-key", "revoke", k.ID)
		if errOut, code := as(rotated, "list"); code != 1 || !strings.Contains(errOut, "401") {
			t.Fatalf("a revoked key: exit %d: %s", code, errOut)
		}
	})

	t.Run("desktop links", func(t *testing.T) {
		t.Parallel()
		web := d.web(t)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"desktop", "desk", "--print"}, `^https://desktop--[a-z0-9]+\.froog\.test/#dt_`},
			{[]string{"desktop", "desk", "--print", "--theme", "light"}, `^https://desktop--[a-z0-9]+\.froog\.test/\?theme=light#dt_`},
			{[]string{"browser", "desk", "--print"}, `^https://browser--[a-z0-9]+\.froog\.test/#dt_`},
			{[]string{"wall", "--print"}, `^https://wall--[a-z0-9]+\.froog\.test/#dt_`},
		} {
			link := d.ok(t, tc.args...)
			if !regexp.MustCompile(tc.want).MatchString(link) {
				t.Errorf("froog %s printed %.40s…, want %s", strings.Join(tc.args, " "), link, tc.want)
				continue
			}
			// The viewer page answers; the token after # never reaches it.
			if code, body := get(t, web, strings.Split(link, "#")[0], "Accept", "text/html"); code != 200 || !strings.Contains(strings.ToLower(body), "<html") {
				t.Errorf("froog %s: the page answered %d", strings.Join(tc.args, " "), code)
			}
		}
		var l struct {
			URL       string    `json:"url"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		if err := json.Unmarshal([]byte(d.ok(t, "desktop", "desk", "--json")), &l); err != nil || time.Until(l.ExpiresAt) > 11*time.Minute || time.Until(l.ExpiresAt) < 8*time.Minute {
			t.Fatalf("desktop --json: %v, expires %v; want in 10 minutes", err, l.ExpiresAt)
		}
		if _, errOut, code := d.run(t, "", "desktop", "desk", "--print", "--theme", "purple"); code != 1 || !strings.Contains(errOut, "400") {
			t.Fatalf("--theme purple: exit %d: %s", code, errOut)
		}
		// stop --no-wait prints the stop's id; --status follows it.
		stop := d.ok(t, "stop", "desk", "--no-wait")
		if !strings.HasPrefix(stop, "stop_") {
			t.Fatalf("stop --no-wait printed %q", stop)
		}
		wait.For(t, 30*time.Second, "the stop to complete", func() bool {
			return d.ok(t, "stop", "--status", stop) == stop+" desk completed"
		})
		if _, errOut, code := d.run(t, "", "stop"); code != 1 || !strings.Contains(errOut, "--status") {
			t.Fatalf("stop without a name: exit %d: %s", code, errOut)
		}
		if _, errOut, code := d.run(t, "", "desktop", "desk", "--print"); code != 1 || !strings.Contains(errOut, "409") {
			t.Fatalf("desktop of a stopped sandbox: exit %d: %s", code, errOut)
		}

		// start's settings, kept for later starts.
		if _, errOut, code := d.run(t, "", "start", "desk", "--environment", "--no-environment"); code != 1 || !strings.Contains(errOut, "choose one") {
			t.Fatalf("start with --environment and --no-environment: exit %d: %s", code, errOut)
		}
		if got := d.ok(t, "start", "desk", "--ttl", "2h", "-e", "STAGE=two"); got != "desk running" {
			t.Fatalf("start --ttl -e printed %q", got)
		}
		var started struct {
			TTLSecs int `json:"ttl_secs"`
		}
		if err := json.Unmarshal([]byte(d.ok(t, "info", "desk", "--json")), &started); err != nil || started.TTLSecs != 7200 {
			t.Fatalf("start --ttl 2h: %v ttl_secs %d, want 7200", err, started.TTLSecs)
		}
		if got := d.ok(t, "exec", "desk", "--", "echo $STAGE"); got != "two" {
			t.Fatalf("start -e: %q", got)
		}
	})
}

// Help reads like the docs' CLI reference; completions print for each shell.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	d := &dev{home: t.TempDir()}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"froog gives every agent its own Linux", "FROOG_API_KEY", "--json", "new", "exec", "host", "url-token", "desktop", "completions"}},
		{[]string{"exec", "--help"}, []string{"froog exec my-box --detach --", "--timeout", "exits 124", "--cwd", "-e, --env", "--no-stdin"}},
		{[]string{"host", "--help"}, []string{"--public", "--subdomain", "--title", "--rm"}},
		{[]string{"new", "--help"}, []string{"--os", "--max-lifetime", "--delete-after", "--no-snapshots", "--no-auto-stop", "--host"}},
		{[]string{"stop", "--help"}, []string{"--no-wait", "--status"}},
		{[]string{"status", "--help"}, []string{"--check", "froog info NAME"}},
		{[]string{"start", "--help"}, []string{"--size", "--ttl", "-e, --env", "--no-environment", "--environment "}},
		{[]string{"fork", "--help"}, []string{"NAME@latest", "--count", "--size", "--ttl", "-e, --env", "--no-snapshots"}},
		{[]string{"snapshot", "--help"}, []string{"--name", "--delete ", "--delete-auto"}},
		{[]string{"restore", "--help"}, []string{"NAME@latest"}},
		{[]string{"delete", "--help"}, []string{"saved snapshots stay", "-y, --yes"}},
		{[]string{"url-token", "--help"}, []string{"froog url-token create my-box 3000 --ttl 2h --label alice", "revoke"}},
		{[]string{"completions", "bash"}, []string{"bash completion"}},
		{[]string{"completions", "zsh"}, []string{"#compdef froog"}},
		{[]string{"completions", "fish"}, []string{"complete -c froog"}},
	} {
		out := d.ok(t, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("froog %s lacks %q", strings.Join(tc.args, " "), w)
			}
		}
	}
	if _, errOut, code := d.run(t, "", "completions", "tcsh"); code != 1 || !strings.Contains(errOut, "tcsh") {
		t.Errorf("completions tcsh: exit %d: %s", code, errOut)
	}
}
