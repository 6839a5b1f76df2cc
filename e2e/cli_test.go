package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// The docs' sections through the froog binary against froogd dev: login,
// Public URLs, A token per viewer, Background commands, Snapshots & forks
// and Desktop → Links, each on its own sandbox, checking what froog
// prints and its exit codes.
func TestCLIWalkthrough(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	froog := newCLI(t)
	key := d.c.key // the account's, which froogd dev made

	// Before login: a clear error. Login: the key on stdin, checked, saved.
	if _, errOut, code := froog.run(t, "", "list"); code != 1 || !strings.Contains(errOut, "froog login") {
		t.Fatalf("list before login: exit %d: %s", code, errOut)
	}
	if out, errOut, code := froog.run(t, "", "status", "--check"); code != 1 || !strings.Contains(errOut, "froog login") || !strings.Contains(out, "key:    not set") {
		t.Fatalf("status --check before login: exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code := froog.run(t, "froog_wrong\n", "login", "--url", d.c.base); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("login with a wrong key: exit %d: %s", code, errOut)
	}
	if out, errOut, code := froog.run(t, key+"\n", "login", "--url", d.c.base+"/v1"); code != 0 || secretRE.MatchString(out+errOut) {
		t.Fatalf("login: exit %d: %s %s", code, out, errOut)
	}
	cfg := filepath.Join(froog.home, ".config", "froog", "config.json")
	if st, err := os.Stat(cfg); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v, want mode 600", st, err)
	}

	// status says where the key comes from (never the key) and that the
	// API answers; --check fails when it does not.
	if out := froog.ok(t, "status", "--check"); !strings.Contains(out, d.c.base+"/v1 (answers)") || !strings.Contains(out, "key:    the config file") ||
		!strings.Contains(out, cfg) || strings.Contains(out, key) {
		t.Fatalf("status --check after login: %s", out)
	}
	if out, errOut, code := froog.runEnv(t, []string{"FROOG_API_URL=http://127.0.0.1:1"}, "", "status", "--check"); code != 1 || !strings.Contains(errOut, "connection refused") || !strings.Contains(out, "does not answer") {
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
		if _, errOut, code := froog.runEnv(t, []string{tc.env}, "", "list"); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("list with %s: exit %d: %s", tc.env, code, errOut)
		}
	}
	if _, errOut, code := froog.runEnv(t, []string{"FROOG_API_KEY=" + key, "FROOG_API_URL=" + d.c.base}, "", "list"); code != 0 {
		t.Fatalf("list with the environment's key and URL: exit %d: %s", code, errOut)
	}

	// Errors: the API's code, message and request id, exit 1.
	if _, errOut, code := froog.run(t, "", "info", "nope"); code != 1 || !regexp.MustCompile(`404 not_found: .*\(request \S+\)`).MatchString(errOut) {
		t.Fatalf("info nope: exit %d: %q", code, errOut)
	}
	if _, errOut, code := froog.run(t, "", "new", "bad", "--ttl", "soon", "--host", "x"); code != 1 || !strings.Contains(errOut, "--ttl") || !strings.Contains(errOut, "--host") {
		t.Fatalf("new with two bad flags: exit %d: %q, want both named", code, errOut)
	}

	for _, name := range []string{"web", "jobs", "snap", "desk", "files"} {
		if got := froog.ok(t, "new", name); got != name {
			t.Fatalf("froog new %s printed %q", name, got)
		}
	}
	if got := froog.ok(t, "status", "web"); !strings.Contains(got, "name: web\n") || !strings.Contains(got, "state: running") {
		t.Fatalf("status web: %s", got)
	}
	var listed []struct{ Name, State string }
	if err := json.Unmarshal([]byte(froog.ok(t, "list", "--json")), &listed); err != nil || len(listed) != 5 || listed[0].State != "running" {
		t.Fatalf("list --json: %v %+v", err, listed)
	}
	// A URL from the start, labels and settings on new.
	pre := froog.ok(t, "new", "preview", "--ttl", "15m", "--auto-start", "--host", "3000:public", "--host", "3001", "--label", "team=web", "-e", "TENANT=42",
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
	if err := json.Unmarshal([]byte(froog.ok(t, "info", "preview", "--json")), &info); err != nil || !info.AutoStart || info.TTLSecs != 900 || info.Labels["team"] != "web" ||
		info.OS != "debian-13" || info.MaxLifetimeSecs != 7200 || info.DeleteAfterSecs != 86400 {
		t.Fatalf("info --json: %v %+v", err, info)
	}
	if got := froog.ok(t, "exec", "preview", "--", "echo $TENANT"); got != "42" {
		t.Fatalf("-e on new: %q", got)
	}
	if got := froog.ok(t, "list", "--label", "team=web"); !strings.Contains(got, "preview") || strings.Contains(got, "jobs") {
		t.Fatalf("list --label team=web: %s", got)
	}

	t.Run("public URLs and viewer tokens", func(t *testing.T) {
		t.Parallel()
		web := d.web(false)
		port := loopback.FreePort(t)
		p := fmt.Sprint(port)
		job := froog.ok(t, "exec", "web", "--detach", "--", fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port))
		if !strings.HasPrefix(job, "job_") {
			t.Fatalf("exec --detach printed %q, want a job id", job)
		}
		froog.ok(t, "wait", "web", "--port", p, "--timeout", "30s")
		if _, errOut, code := froog.run(t, "", "wait", "web", "--port", fmt.Sprint(loopback.FreePort(t)), "--timeout", "1s"); code != 1 || !strings.Contains(errOut, "nothing listens") {
			t.Fatalf("wait on a free port: exit %d: %s", code, errOut)
		}

		link := froog.ok(t, "host", "web", p)
		if !regexp.MustCompile(`^https://web-` + p + `-[a-z0-9]{6}\.froog\.test/\?_token=pt_`).MatchString(link) {
			t.Fatalf("host printed %.60s…", link)
		}
		bare := strings.Split(link, "?")[0]
		if res, _ := visit(t, web, "GET", bare); res.StatusCode != 401 {
			t.Fatalf("private URL without a token: %d", res.StatusCode)
		}
		if res, _ := visit(t, web, "GET", link); res.StatusCode != 302 {
			t.Fatalf("the link: %d, want 302 to set the cookie", res.StatusCode)
		}
		if res, body := visit(t, web, "GET", bare, "X-Froog-Url-Token", urlTokenOf(t, link)); res.StatusCode != 200 || !strings.Contains(body, "Directory listing") {
			t.Fatalf("with the token: %d %.80s", res.StatusCode, body)
		}

		// A token per viewer: works, is listed, and fails once revoked.
		var vt struct{ ID, URL, Label string }
		if err := json.Unmarshal([]byte(froog.ok(t, "url-token", "create", "web", p, "--ttl", "2h", "--label", "alice", "--json")), &vt); err != nil || !strings.Contains(vt.URL, "?_token=pvt_") || !strings.HasPrefix(vt.ID, "utk_") {
			t.Fatalf("url-token create --json: %v %+v", err, vt.ID)
		}
		viewer := urlTokenOf(t, vt.URL)
		if res, _ := visit(t, web, "GET", bare, "X-Froog-Url-Token", viewer); res.StatusCode != 200 {
			t.Fatalf("the viewer token: %d", res.StatusCode)
		}
		if list := froog.ok(t, "url-token", "list", "web", p); !strings.Contains(list, vt.ID) || !strings.Contains(list, "alice") || strings.Contains(list, "pvt_") {
			t.Fatalf("url-token list: %s", list)
		}
		froog.ok(t, "url-token", "revoke", "web", p, vt.ID)
		if res, _ := visit(t, web, "GET", bare, "X-Froog-Url-Token", viewer); res.StatusCode != 401 {
			t.Fatalf("a revoked viewer token: %d, want 401", res.StatusCode)
		}
		if res, _ := visit(t, web, "GET", bare, "X-Froog-Url-Token", urlTokenOf(t, link)); res.StatusCode != 200 {
			t.Fatalf("the URL's own token after a viewer's revoke: %d", res.StatusCode)
		}

		// --public drops the token; hosting again makes a new one.
		if pub := froog.ok(t, "host", "web", p, "--public"); pub != bare {
			t.Fatalf("--public printed %q, want %q", pub, bare)
		}
		if res, _ := visit(t, web, "GET", bare); res.StatusCode != 200 {
			t.Fatalf("public URL: %d", res.StatusCode)
		}
		if _, errOut, code := froog.run(t, "", "url-token", "create", "web", p); code != 1 || !strings.Contains(errOut, "url_public") {
			t.Fatalf("a viewer token on a public URL: exit %d: %s", code, errOut)
		}
		again := froog.ok(t, "host", "web", p)
		if urlTokenOf(t, again) == urlTokenOf(t, link) {
			t.Fatal("hosting again after --public kept the old token")
		}
		if res, _ := visit(t, web, "GET", bare, "X-Froog-Url-Token", urlTokenOf(t, link)); res.StatusCode != 401 {
			t.Fatalf("the replaced token: %d, want 401", res.StatusCode)
		}

		// --title labels it in the list; --subdomain renames it; --rm removes it.
		froog.ok(t, "host", "web", p, "--title", "API docs")
		if list := froog.ok(t, "host", "web"); !strings.Contains(list, "API docs") || !strings.Contains(list, bare) {
			t.Fatalf("host list: %s", list)
		}
		renamed := froog.ok(t, "host", "web", p, "--subdomain", "acme-demo")
		if !strings.HasPrefix(renamed, "https://acme-demo.froog.test/?_token=pt_") {
			t.Fatalf("--subdomain printed %.50s…", renamed)
		}
		if res, _ := visit(t, web, "GET", bare, "X-Froog-Url-Token", urlTokenOf(t, renamed)); res.StatusCode != 404 {
			t.Fatalf("the old address after --subdomain: %d, want 404", res.StatusCode)
		}
		froog.ok(t, "host", "web", p, "--rm")
		if list := froog.ok(t, "host", "web", "--json"); list != "[]" {
			t.Fatalf("host list after --rm: %s", list)
		}
		froog.ok(t, "kill", "web", job)
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
			out, errOut, code := froog.run(t, tc.stdin, tc.args...)
			if code != tc.wantCode || out != tc.wantOut {
				t.Errorf("%s: exit %d, stdout %q (stderr %q); want exit %d, %q", tc.name, code, out, errOut, tc.wantCode, tc.wantOut)
			}
		}
		if _, errOut, _ := froog.run(t, "", "exec", "jobs", "--", "echo err >&2"); errOut != "err\n" {
			t.Errorf("stderr: %q", errOut)
		}

		job := froog.ok(t, "exec", "jobs", "--detach", "--", "echo one; sleep 1; echo two; exit 4")
		if !regexp.MustCompile(`^job_[0-9a-f]+$`).MatchString(job) {
			t.Fatalf("--detach printed %q", job)
		}
		if out, _, code := froog.run(t, "", "logs", "jobs", job, "-f"); code != 4 || out != "one\ntwo\n" {
			t.Fatalf("logs -f: exit %d, %q; want exit 4, one and two", code, out)
		}
		if out := froog.ok(t, "logs", "jobs", job); out != "one\ntwo" {
			t.Fatalf("logs: %q", out)
		}
		// The history: the job and the exec that wrote to stderr, with
		// their output.
		hist := froog.ok(t, "history", "jobs")
		rec := regexp.MustCompile(`(?m)^(cmd_[0-9a-f]+)\s+stream\s+exited\s+0\s+.*echo err >&2$`).FindStringSubmatch(hist)
		if !strings.HasPrefix(hist, "ID ") || !regexp.MustCompile(`(?m)^`+job+`\s+detached\s+exited\s+4\s`).MatchString(hist) || rec == nil {
			t.Fatalf("history:\n%s", hist)
		}
		if out := froog.ok(t, "history", "jobs", rec[1], "--stderr"); out != "err" {
			t.Errorf("history of the exec, --stderr: %q", out)
		}
		if out, _, code := froog.run(t, "", "history", "jobs", job, "-f"); code != 4 || out != "one\ntwo\n" {
			t.Errorf("history -f of the job: exit %d, %q; want exit 4, one and two", code, out)
		}
		long := froog.ok(t, "exec", "jobs", "--detach", "--", "sleep 300")
		froog.ok(t, "kill", "jobs", long)
		wait.For(t, 20*time.Second, "the killed job to show as killed", func() bool {
			list := froog.ok(t, "jobs", "jobs")
			return regexp.MustCompile(long+`\s+killed`).MatchString(list) && regexp.MustCompile(job+`\s+exited\s+4`).MatchString(list)
		})

		// metrics and ps read the running sandbox (this host's /proc
		// under the local driver).
		if out := froog.ok(t, "metrics", "jobs"); !regexp.MustCompile(`^cpu [0-9.]+% of \d+ vCPU\nmemory [0-9.]+ GB of [0-9.]+ GB \(\d+%\)\ndisk `).MatchString(out) {
			t.Errorf("metrics: %q", out)
		}
		var m struct {
			CPUCount int `json:"cpu_count"`
		}
		if err := json.Unmarshal([]byte(froog.ok(t, "metrics", "jobs", "--json")), &m); err != nil || m.CPUCount < 1 {
			t.Errorf("metrics --json: %+v, %v", m, err)
		}
		if out := froog.ok(t, "ps", "jobs"); !strings.HasPrefix(out, "PID ") || !strings.Contains(out, "COMMAND") || strings.Count(out, "\n") < 1 {
			t.Errorf("ps: %q", out)
		}
		// Stopped, ps shows the busiest processes as it stopped: spinning
		// ones among them. The local driver's sandboxes share this host's
		// /proc, whose other processes compete for the 12 places on a
		// loaded machine (a whole parallel test phase): four spinners
		// (named so that their parent's command line is not), the stop
		// once ps of the running sandbox shows one among its first 12, and
		// up to three stops, each after a warm start that resumes them.
		// A sample without them in all three fails.
		froog.ok(t, "exec", "jobs", "--detach", "--", "l=last; for i in 1 2 3 4; do sh -c 'while :; do :; done' froog-$l & done; wait")
		var stopped string
		for try := range 3 {
			if try > 0 {
				t.Logf("stop %d: no spinner among the 12 busiest of the host: %q", try, stopped)
				froog.ok(t, "start", "jobs")
			}
			wait.For(t, 20*time.Second, "a spinner among the 12 busiest", func() bool {
				rows := strings.SplitN(froog.ok(t, "ps", "jobs"), "\n", 14)
				return strings.Contains(strings.Join(rows[:min(len(rows), 13)], "\n"), "froog-last")
			})
			froog.ok(t, "stop", "jobs")
			if stopped = froog.ok(t, "ps", "jobs"); strings.Contains(stopped, "froog-last") {
				break
			}
		}
		if !strings.HasPrefix(stopped, "not running: its processes as it stopped, ") || !strings.Contains(stopped, "froog-last") {
			t.Errorf("ps of a stopped sandbox: %q", stopped)
		}
	})

	t.Run("snapshots and forks", func(t *testing.T) {
		t.Parallel()
		froog.ok(t, "exec", "snap", "--", "echo v1 > version")
		snap := froog.ok(t, "snapshot", "snap", "--name", "before-upgrade")
		if !strings.HasPrefix(snap, "snap_") {
			t.Fatalf("snapshot printed %q", snap)
		}
		wait.For(t, 60*time.Second, "the saved snapshot to be available", func() bool {
			var list []struct{ Name, Status string }
			json.Unmarshal([]byte(froog.ok(t, "snapshots", "snap", "--json")), &list)
			for _, s := range list {
				if s.Name == "before-upgrade" && s.Status == "available" {
					return true
				}
			}
			return false
		})
		if saved := froog.ok(t, "snapshots"); !strings.Contains(saved, "before-upgrade") {
			t.Fatalf("snapshots (saved): %s", saved)
		}
		froog.ok(t, "exec", "snap", "--", "echo v2 > version")
		if got := froog.ok(t, "fork", "snap@before-upgrade", "snap-2"); got != "snap-2" {
			t.Fatalf("fork printed %q", got)
		}
		if got := froog.ok(t, "exec", "snap-2", "--", "cat version"); got != "v1" {
			t.Fatalf("the fork from the snapshot has %q, want v1", got)
		}
		froog.ok(t, "delete", "snap-2", "-y") // the account runs 10 at once
		// A fork's own timer and variables, on top of the source's.
		if got := froog.ok(t, "fork", "snap", "snap-env", "--ttl", "15m", "-e", "GREETING=forked"); got != "snap-env" {
			t.Fatalf("fork --ttl -e printed %q", got)
		}
		var forked struct {
			TTLSecs int `json:"ttl_secs"`
		}
		if err := json.Unmarshal([]byte(froog.ok(t, "info", "snap-env", "--json")), &forked); err != nil || forked.TTLSecs != 900 {
			t.Fatalf("fork --ttl 15m: %v ttl_secs %d, want 900", err, forked.TTLSecs)
		}
		if got := froog.ok(t, "exec", "snap-env", "--", "echo $GREETING"); got != "forked" {
			t.Fatalf("fork -e: %q", got)
		}
		froog.ok(t, "delete", "snap-env", "-y")
		if got := froog.ok(t, "fork", "snap", "try", "--count", "2"); got != "try-1\ntry-2" {
			t.Fatalf("fork --count 2 printed %q", got)
		}
		if got := froog.ok(t, "exec", "try-2", "--", "cat version"); got != "v2" {
			t.Fatalf("a fork of the sandbox has %q, want v2", got)
		}
		if got := froog.ok(t, "restore", "snap@before-upgrade"); got != "snap running" {
			t.Fatalf("restore printed %q", got)
		}
		if got := froog.ok(t, "exec", "snap", "--", "cat version"); got != "v1" {
			t.Fatalf("after restore: %q, want v1", got)
		}
		if _, errOut, code := froog.run(t, "", "restore", "snap"); code != 1 || !strings.Contains(errOut, "NAME@SNAPSHOT") {
			t.Fatalf("restore without a snapshot: exit %d: %s", code, errOut)
		}
		// A saved snapshot is a template for new; --all lists every
		// snapshot, and --rm removes a saved one.
		if got := froog.ok(t, "new", "from-saved", "--from", "before-upgrade"); got != "from-saved" {
			t.Fatalf("new --from printed %q", got)
		}
		if got := froog.ok(t, "exec", "from-saved", "--", "cat version"); got != "v1" {
			t.Fatalf("new --from before-upgrade has %q, want v1", got)
		}
		if all := froog.ok(t, "snapshots", "--all"); !strings.Contains(all, "before-upgrade") || !strings.Contains(all, "snap") {
			t.Fatalf("snapshots --all: %s", all)
		}
		froog.ok(t, "snapshots", "--rm", "before-upgrade")
		if saved := froog.ok(t, "snapshots"); strings.Contains(saved, "before-upgrade") {
			t.Fatalf("snapshots after --rm: %s", saved)
		}

		// --delete removes one snapshot of the sandbox.
		extra := strings.Fields(froog.ok(t, "snapshot", "snap"))[0]
		if got := froog.ok(t, "snapshot", "snap", "--delete", extra); got != extra+" deleted" {
			t.Fatalf("snapshot --delete printed %q", got)
		}
		if list := froog.ok(t, "snapshots", "snap", "--json"); strings.Contains(list, extra) {
			t.Fatalf("snapshot %s is still listed after --delete: %s", extra, list)
		}
		froog.ok(t, "delete", "try-1", "-y")
		if got := froog.ok(t, "list", "--prefix", "try"); strings.Contains(got, "try-1") || !strings.Contains(got, "try-2") {
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
		if got := froog.ok(t, "push", "files", dir); !strings.HasPrefix(got, "2 files to files:") {
			t.Fatalf("push printed %q", got)
		}
		if got := froog.ok(t, "exec", "files", "--", "cd app && find . -type f | sort && cat sub/b.txt"); got != "./a.txt\n./sub/b.txt\nb" {
			t.Fatalf("after push: %q, want a.txt and sub/b.txt without build outputs", got)
		}
		froog.ok(t, "push", "files", dir, "--to", "src/api")
		if got := froog.ok(t, "exec", "files", "--", "cat src/api/a.txt"); got != "a" {
			t.Fatalf("push --to: %q", got)
		}

		local := filepath.Join(t.TempDir(), "up.sh")
		os.WriteFile(local, []byte("echo run\n"), 0o755)
		froog.ok(t, "scp", local, "files:bin/")
		if got := froog.ok(t, "exec", "files", "--", "bin/up.sh"); got != "run" {
			t.Fatalf("scp up (mode kept): %q", got)
		}
		down := t.TempDir()
		froog.ok(t, "scp", "files:app/sub/b.txt", down)
		if b, err := os.ReadFile(filepath.Join(down, "b.txt")); err != nil || string(b) != "b" {
			t.Fatalf("scp down: %q %v", b, err)
		}
		if _, errOut, code := froog.run(t, "", "scp", "files:nope.txt", down); code != 1 || !strings.Contains(errOut, "404") {
			t.Fatalf("scp of a missing file: exit %d: %s", code, errOut)
		}

		// ssh checks the host key the API gives (recorded in froog's own
		// known-hosts file): without an account key it gets as far as
		// authentication, never to a host-key failure.
		if _, err := exec.LookPath("ssh"); err != nil {
			testdep.Missing(t, "no ssh client")
		}
		_, errOut, code := froog.run(t, "", "ssh", "files", "--", "true")
		if code != 255 || !strings.Contains(errOut, "Permission denied") || strings.Contains(errOut, "Host key verification failed") {
			t.Fatalf("ssh without a key: exit %d: %s", code, errOut)
		}
		if b, err := os.ReadFile(filepath.Join(froog.home, ".config", "froog", "known_hosts")); err != nil || !strings.Contains(string(b), "ssh-ed25519 ") {
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
		if err := json.Unmarshal([]byte(froog.ok(t, "api-key", "create", "watcher", "--preset", "read-only", "--ttl", "never", "--json")), &k); err != nil ||
			!strings.HasPrefix(k.Key, "froog_") || k.ExpiresAt != nil || slices.Contains(k.Actions, "sandbox.create") {
			t.Fatalf("api-key create --preset read-only --ttl never: %v id %s, expires %v, actions %v", err, k.ID, k.ExpiresAt, k.Actions)
		}
		if list := froog.ok(t, "api-key", "list"); !strings.Contains(list, k.ID) || !strings.Contains(list, "watcher") || strings.Contains(list, k.Key) {
			t.Fatalf("api-key list: %s", list)
		}
		as := func(key string, args ...string) (string, int) {
			_, errOut, code := froog.runEnv(t, []string{"FROOG_API_KEY=" + key}, "", args...)
			return errOut, code
		}
		if errOut, code := as(k.Key, "list"); code != 0 {
			t.Fatalf("list with the read-only key: exit %d: %s", code, errOut)
		}
		if errOut, code := as(k.Key, "new", "nope"); code != 1 || !strings.Contains(errOut, "403 api_key_action_forbidden") {
			t.Fatalf("new with the read-only key: exit %d: %s", code, errOut)
		}
		rotated := froog.ok(t, "api-key", "rotate", k.ID)
		if errOut, code := as(k.Key, "list"); code != 1 || !strings.Contains(errOut, "401") {
			t.Fatalf("the key before its rotate: exit %d: %s", code, errOut)
		}
		if errOut, code := as(rotated, "list"); code != 0 {
			t.Fatalf("the rotated key: exit %d: %s", code, errOut)
		}
		froog.ok(t, "api-key", "revoke", k.ID)
		if errOut, code := as(rotated, "list"); code != 1 || !strings.Contains(errOut, "401") {
			t.Fatalf("a revoked key: exit %d: %s", code, errOut)
		}
	})

	t.Run("desktop links", func(t *testing.T) {
		t.Parallel()
		web := d.web(false)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"desktop", "desk", "--print"}, `^https://desktop--[a-z0-9]+\.froog\.test/#dt_`},
			{[]string{"desktop", "desk", "--print", "--theme", "light"}, `^https://desktop--[a-z0-9]+\.froog\.test/\?theme=light#dt_`},
			{[]string{"browser", "desk", "--print"}, `^https://browser--[a-z0-9]+\.froog\.test/#dt_`},
			{[]string{"wall", "--print"}, `^https://wall--[a-z0-9]+\.froog\.test/#dt_`},
		} {
			link := froog.ok(t, tc.args...)
			if !regexp.MustCompile(tc.want).MatchString(link) {
				t.Errorf("froog %s printed %.40s…, want %s", strings.Join(tc.args, " "), link, tc.want)
				continue
			}
			// The viewer page answers; the token after # never reaches it.
			if res, body := visit(t, web, "GET", strings.Split(link, "#")[0], "Accept", "text/html"); res.StatusCode != 200 || !strings.Contains(strings.ToLower(body), "<html") {
				t.Errorf("froog %s: the page answered %d", strings.Join(tc.args, " "), res.StatusCode)
			}
		}
		var l struct {
			URL       string    `json:"url"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		if err := json.Unmarshal([]byte(froog.ok(t, "desktop", "desk", "--json")), &l); err != nil || time.Until(l.ExpiresAt) > 11*time.Minute || time.Until(l.ExpiresAt) < 8*time.Minute {
			t.Fatalf("desktop --json: %v, expires %v; want in 10 minutes", err, l.ExpiresAt)
		}
		if _, errOut, code := froog.run(t, "", "desktop", "desk", "--print", "--theme", "purple"); code != 1 || !strings.Contains(errOut, "400") {
			t.Fatalf("--theme purple: exit %d: %s", code, errOut)
		}
		// stop --no-wait prints the stop's id; --status follows it.
		stop := froog.ok(t, "stop", "desk", "--no-wait")
		if !strings.HasPrefix(stop, "stop_") {
			t.Fatalf("stop --no-wait printed %q", stop)
		}
		wait.For(t, 30*time.Second, "the stop to complete", func() bool {
			return froog.ok(t, "stop", "--status", stop) == stop+" desk completed"
		})
		if _, errOut, code := froog.run(t, "", "stop"); code != 1 || !strings.Contains(errOut, "--status") {
			t.Fatalf("stop without a name: exit %d: %s", code, errOut)
		}
		if _, errOut, code := froog.run(t, "", "desktop", "desk", "--print"); code != 1 || !strings.Contains(errOut, "409") {
			t.Fatalf("desktop of a stopped sandbox: exit %d: %s", code, errOut)
		}

		// start's settings, kept for later starts.
		if _, errOut, code := froog.run(t, "", "start", "desk", "--environment", "--no-environment"); code != 1 || !strings.Contains(errOut, "choose one") {
			t.Fatalf("start with --environment and --no-environment: exit %d: %s", code, errOut)
		}
		if got := froog.ok(t, "start", "desk", "--ttl", "2h", "-e", "STAGE=two"); got != "desk running" {
			t.Fatalf("start --ttl -e printed %q", got)
		}
		var started struct {
			TTLSecs int `json:"ttl_secs"`
		}
		if err := json.Unmarshal([]byte(froog.ok(t, "info", "desk", "--json")), &started); err != nil || started.TTLSecs != 7200 {
			t.Fatalf("start --ttl 2h: %v ttl_secs %d, want 7200", err, started.TTLSecs)
		}
		if got := froog.ok(t, "exec", "desk", "--", "echo $STAGE"); got != "two" {
			t.Fatalf("start -e: %q", got)
		}
	})
}

// urlTokenOf is the _token of a URL froog printed.
func urlTokenOf(t *testing.T, link string) string {
	t.Helper()
	_, tok, ok := strings.Cut(link, "?_token=")
	if !ok {
		t.Fatalf("%.60s… has no _token", link)
	}
	return tok
}
