package e2e_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// walkStep is one command of the README's walkthrough and the answer the
// README shows for it (a pattern: … is anything, k7f2qx any URL's RAND).
type walkStep struct {
	cmd, want string
}

// walkSections are the README's sections whose sh blocks are the
// walkthrough, in order: the CLI's, then the API's by hand.
var walkSections = []string{"A first public URL, with the froog CLI", "The API by hand, with curl"}

// readmeSection is the text of README.md's section title.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	return sec
}

// readmeWalkthrough reads the commands of README.md's walkthrough: the
// sh blocks of its walkSections. A line that starts with "# " is the
// answer the README shows for the command above.
func readmeWalkthrough(t *testing.T) []walkStep {
	t.Helper()
	var steps []walkStep
	for _, title := range walkSections {
		for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(readmeSection(t, title), -1) {
			for _, line := range strings.Split(strings.TrimSpace(block[1]), "\n") {
				switch {
				case strings.HasPrefix(line, "# "):
					if len(steps) == 0 || steps[len(steps)-1].want != "" {
						t.Fatalf("README walkthrough: answer %q follows no command", line)
					}
					steps[len(steps)-1].want = strings.TrimPrefix(line, "# ")
				case strings.TrimSpace(line) != "":
					steps = append(steps, walkStep{cmd: line})
				}
			}
		}
	}
	if len(steps) < 10 || steps[0].cmd != "make run" {
		t.Fatalf("README walkthrough: %d commands, the first %q; want make run first", len(steps), steps[0].cmd)
	}
	return steps
}

// answerRE makes the README's shown answer a pattern for the whole output.
func answerRE(want string) *regexp.Regexp {
	q := regexp.QuoteMeta(want)
	q = strings.ReplaceAll(q, "…", ".*")
	q = strings.ReplaceAll(q, "k7f2qx", "[a-z0-9]{6}")
	return regexp.MustCompile(`(?s)^` + q + `$`)
}

// isRead says whether a walkthrough command only reads: one that may be
// asked again until it shows the README's answer, as a newcomer would.
func isRead(line string) bool {
	if f := strings.Fields(line); len(f) > 1 && f[0] == "froog" {
		switch f[1] {
		case "info", "list", "jobs", "logs", "audit", "snapshots":
			return true
		}
		return strings.HasPrefix(line, "froog url-token list ")
	}
	return !strings.Contains(line, " -d ") && !strings.Contains(line, " -X ")
}

// The README's walkthrough, its commands as written (the addresses
// aside: this froogd listens on free ports), in a fresh froogd dev started
// as make run starts it, in a folder of its own with the froog CLI in
// bin/ as make build puts it there; every answer the README shows is
// checked, and so are the lines of froogd's banner the README quotes, so
// the README cannot drift from the product.
func TestDevWalkthrough(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile("../Makefile")
	if err != nil || !regexp.MustCompile(`(?m)^run: .*\n\t\./bin/froogd dev$`).Match(mk) {
		t.Fatalf("make run is no longer ./bin/froogd dev: the walkthrough starts froogd dev as it did (%v)", err)
	}
	if !regexp.MustCompile(`(?m)^build: .*\n(\t.*\n)*\t.* -o bin/froog \./cmd/froog$`).Match(mk) {
		t.Fatal("make build no longer builds bin/froog, which the README's walkthrough runs")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the walkthrough needs curl")
	}
	steps := readmeWalkthrough(t)
	dir := t.TempDir()
	// The CLI TestMain built, where make build puts it.
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(froogCLI, filepath.Join(dir, "bin", "froog")); err != nil {
		t.Fatal(err)
	}
	edgePort := loopback.FreePort(t)
	args := []string{"dev", "--api-addr", "127.0.0.1:0", "--edge-addr", fmt.Sprintf("127.0.0.1:%d", edgePort), "--edge-http-addr", "127.0.0.1:0"}
	cmd := exec.Command(froogd, args...)
	cmd.Dir = dir // make run's data folder, ./.froog, is this one's
	p, m := startCmd(t, regexp.MustCompile(`(?s)API:\s+(http://\S+)/v1.*\n(  CLI: [^\n]*\n[^\n]*)\n`), cmd, args)
	api := strings.TrimPrefix(m[1], "http://")
	addrs := strings.NewReplacer("127.0.0.1:8080", api, ".froog.localhost:8443", fmt.Sprintf(".froog.localhost:%d", edgePort))

	// The banner's lines for the CLI, as the README quotes them.
	quoted := regexp.MustCompile("(?s)```text\n(  CLI: .*?)\n```").FindStringSubmatch(readmeSection(t, walkSections[0]))
	if quoted == nil || addrs.Replace(quoted[1]) != m[2] {
		t.Fatalf("the README quotes make run's CLI lines as\n%v\nfroogd dev prints\n%s", quoted, m[2])
	}

	// The shell of a newcomer: HOME here (froog login's config), nothing
	// of FROOG_* from the test's environment.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FROOG_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+dir)
	var (
		prelude []string              // the lines that set the shell up: export, functions
		seen    = map[string]string{} // the last id or token of each prefix seen, and RAND
		idRE    = regexp.MustCompile(`\b(cmd|job|stop|utk|pt|pvt|dt)_[A-Za-z0-9_-]+`)
		randRE  = regexp.MustCompile(`my-box-3000-([a-z0-9]{6})\.`)
		holeRE  = regexp.MustCompile(`\b(cmd|job|stop|utk|pt|pvt)_…`)
	)
	for _, s := range steps[1:] {
		line := addrs.Replace(s.cmd)
		if strings.HasPrefix(line, "export ") || strings.Contains(line, "() {") {
			prelude = append(prelude, line)
			continue
		}
		// The README's placeholders are the values earlier answers gave.
		line = holeRE.ReplaceAllStringFunc(line, func(h string) string {
			v, ok := seen[strings.TrimSuffix(h, "_…")]
			if !ok {
				t.Fatalf("README walkthrough: %q uses %s before any answer gave one", s.cmd, h)
			}
			return v
		})
		if strings.Contains(line, "k7f2qx") {
			line = strings.ReplaceAll(line, "k7f2qx", seen["rand"])
		}
		run := func() string {
			sh := exec.Command("bash", "-c", strings.Join(append(prelude, line), "\n"))
			sh.Dir, sh.Env = dir, env
			var out, errOut bytes.Buffer
			sh.Stdout, sh.Stderr = &out, &errOut
			if err := sh.Run(); err != nil {
				t.Fatalf("%s: %v: %s%s", s.cmd, err, out.String(), errOut.String())
			}
			return strings.TrimSpace(out.String())
		}
		out := run()
		if s.want != "" {
			re := answerRE(addrs.Replace(s.want))
			for deadline := time.Now().Add(10 * time.Second); !re.MatchString(out) && isRead(line) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				out = run()
			}
			if !re.MatchString(out) {
				t.Fatalf("README walkthrough: %s\n got: %s\nwant: %s", s.cmd, out, s.want)
			}
		}
		for _, id := range idRE.FindAllStringSubmatch(out, -1) {
			seen[id[1]] = id[0]
		}
		if r := randRE.FindStringSubmatch(out); r != nil {
			seen["rand"] = r[1]
		}
	}

	// Secrets stay out of the logs.
	key, _ := os.ReadFile(filepath.Join(dir, ".froog", "api-key"))
	p.stop(t)
	logs := p.stderr.String()
	for _, secret := range []string{strings.TrimSpace(string(key)), seen["pt"], seen["pvt"], seen["dt"]} {
		if secret == "" || strings.Contains(logs, secret) {
			t.Fatalf("a secret (%d bytes) is missing from the walk or present in the logs", len(secret))
		}
	}
	if !strings.Contains(logs, `"msg":"request"`) {
		t.Fatalf("no access log: %s", logs)
	}

	// A restart keeps everything, and the same key.
	cmd = exec.Command(froogd, args...)
	cmd.Dir = dir
	_, m = startCmd(t, devReady, cmd, args)
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	var sb struct{ Name, State string }
	c.call("GET", "/v1/sandboxes/my-box", "", 200, &sb)
	if sb.Name != "my-box" {
		t.Fatalf("after a restart: %+v", sb)
	}
}

// The start banner's edge URL answers, over TLS checked against the local
// CA (it was https://127.0.0.1:8443, for which no certificate was made),
// and the banner says how tools that do not resolve *.localhost reach a
// URL.
func TestDevBannerEdgeAnswers(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	banner := regexp.MustCompile(`(?s)API:\s+(http://\S+)/v1.*Edge:\s+(https://\S+) .*\n(.*--resolve.*)\n`)
	_, m := start(t, banner, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0")
	pemBytes, err := os.ReadFile(filepath.Join(data, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	web := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := web.Get(m[2] + "/")
	if err != nil {
		t.Fatalf("the banner's edge URL %s: %v", m[2], err)
	}
	res.Body.Close()
	if res.Header.Get("X-Request-Id") == "" && res.StatusCode != http.StatusNotFound {
		t.Fatalf("the banner's edge URL %s: %s, not the edge's answer", m[2], res.Status)
	}
	if !strings.Contains(m[3], "/etc/hosts") {
		t.Fatalf("banner's resolve line %q: want --resolve and /etc/hosts", m[3])
	}
}

// Local-driver sandboxes share the host's ports: a second sandbox's
// server cannot listen on a port the first holds. Its wait must not say
// ready, and its URL must not serve the first sandbox's app.
func TestDevTwoSandboxesOnePort(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p, m := start(t, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), "dev", "--data", data,
		"--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test")
	key, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	web := edgeClient(t, m[2], filepath.Join(data, "ca.pem"), false)
	port := loopback.FreePort(t)
	type waited struct{ Ready bool }
	urls := map[string]string{}
	for _, name := range []string{"first", "second"} {
		c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
		c.call("POST", "/v1/sandboxes/"+name+"/exec", `{"command": "mkdir -p site && echo `+name+` > site/index.html"}`, 200, nil)
		c.call("POST", "/v1/sandboxes/"+name+"/jobs", fmt.Sprintf(`{"command": "python3 -m http.server %d --bind 127.0.0.1 --directory site"}`, port), 201, nil)
		var u struct{ URL string }
		c.call("POST", "/v1/sandboxes/"+name+"/urls", fmt.Sprintf(`{"port": %d, "public": true}`, port), 201, &u)
		urls[name] = u.URL
		// The first's server starts under a loaded suite: give it a
		// minute. The second's can never be ready; 5 s says so.
		timeout := 5
		if name == "first" {
			timeout = 60
		}
		var w waited
		c.call("POST", "/v1/sandboxes/"+name+"/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": %d}`, port, timeout), 200, &w)
		if want := name == "first"; w.Ready != want {
			t.Fatalf("%s: wait for port %d said ready %v, want %v (the port is the first sandbox's)", name, port, w.Ready, want)
		}
	}
	res, body := visit(t, web, "GET", urls["first"])
	if res.StatusCode != 200 || strings.TrimSpace(body) != "first" {
		t.Fatalf("the first sandbox's URL: %d %q", res.StatusCode, body)
	}
	res, body = visit(t, web, "GET", urls["second"])
	if res.StatusCode == 200 || strings.Contains(body, "first") {
		t.Fatalf("the second sandbox's URL served the first one's app: %d %q", res.StatusCode, body)
	}
	if !wait.Until(5*time.Second, func() bool { return strings.Contains(p.stderr.String(), "refused a port another sandbox holds") }) {
		t.Fatalf("froogd's log does not say the port is another sandbox's: %s", p.stderr.String())
	}
}

// A restart of froogd dev ends the local driver's processes: the sandboxes
// run again, their jobs are lost. The restart says which sandboxes lost
// them, in its output and in each one's audit log (sandbox.degraded).
func TestDevRestartSaysProcessesLost(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	args := []string{"dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test"}
	p, m := start(t, devReady, args...)
	key, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	for _, name := range []string{"busy", "idle"} {
		c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
		c.call("POST", "/v1/sandboxes/"+name+"/exec", `{"command": "true"}`, 200, nil) // running
	}
	c.call("POST", "/v1/sandboxes/busy/jobs", `{"command": "sleep 600"}`, 201, nil)
	c.call("POST", "/v1/sandboxes/idle/stop", "", 202, nil)
	wait.For(t, 10*time.Second, "idle stopped", func() bool {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/idle", "", 200, &sb)
		return sb.State == "stopped"
	})
	p.stop(t)

	lost := regexp.MustCompile(`(?s)API:\s+(http://\S+)/v1.*processes ended when froogd dev stopped[^\n]*: ([^\n]*)\n`)
	_, m = start(t, lost, args...)
	if m[2] != "busy" {
		t.Fatalf("restart named %q as having lost their processes, want busy (idle was stopped)", m[2])
	}
	c.base = m[1]
	var audit struct {
		Events []struct {
			Action, Target string
			Detail         map[string]string
		} `json:"events"`
	}
	c.call("GET", "/v1/audit", "", 200, &audit)
	var got []string
	for _, e := range audit.Events {
		if e.Action == "sandbox.degraded" {
			got = append(got, e.Target+": "+e.Detail["reason"])
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "busy: ") || !strings.Contains(got[0], "processes") {
		t.Fatalf("sandbox.degraded events %q, want one for busy saying why", got)
	}
}
