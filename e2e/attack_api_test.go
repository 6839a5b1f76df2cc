package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// The API's scope holes an outside probe found (issue #24, items 1, 6b,
// 6c and 7b), against the real binary: a key limited to some sandboxes
// (by name or by label) never replaces, deletes or learns of a saved
// snapshot of a sandbox it cannot reach, sees none of the account's SSH
// keys, and gets no other key's answer for an Idempotency-Key; and a
// sandbox the API cannot reach is answered with a fixed message, its
// cause (addresses, SSH) only in the log.

// apiAnswer is a response's status, error code and message.
type apiAnswer struct {
	status        int
	code, message string
	body          []byte
	header        http.Header
}

// ask sends a request with the key and headers (name, value, …).
func (c client) ask(key, method, path, body string, headers ...string) apiAnswer {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	json.Unmarshal(b, &e)
	return apiAnswer{status: res.StatusCode, code: e.Error.Code, message: e.Error.Message, body: b, header: res.Header}
}

func (a apiAnswer) want(t *testing.T, what string, status int, code string) apiAnswer {
	t.Helper()
	if a.status != status || code != "" && a.code != code {
		t.Fatalf("%s: got %d %s, want %d %s: %s", what, a.status, a.code, status, code, a.body)
	}
	return a
}

// scopeKeys are an account's keys: the owner's (admin), one limited to
// sandbox a1 and one limited to the label team=a (both ci).
type scopeKeys struct{ owner, byName, byLabel string }

// accountKeys makes an account and its keys with froogd admin, as an
// operator would; where names the store.
func accountKeys(t *testing.T, where ...string) scopeKeys {
	t.Helper()
	acct := froogdRun(t, append([]string{"admin", "create-account", "--name", "probe", "--max-sandboxes", "10"}, where...)...)
	key := func(flags ...string) string {
		return froogdRun(t, append(append([]string{"admin", "api-key", "create", "--account", acct}, flags...), where...)...)
	}
	return scopeKeys{owner: key("--preset", "admin"), byName: key("--preset", "ci", "--sandbox", "a1"),
		byLabel: key("--preset", "ci", "--label", "team=a")}
}

// devWithKeys is froogd dev on an account made beforehand with
// accountKeys (the embedded store is froogd dev's alone once it runs).
func devWithKeys(t *testing.T) (client, scopeKeys, *proc) {
	var keys scopeKeys
	d := startDev(t, devOptions{args: []string{"--rate-limit", "0"}, prepare: func(data string) string {
		keys = accountKeys(t, "--data", data)
		return keys.owner
	}})
	return d.c, keys, d.p
}

// savedAvailable waits for the saved snapshot name to be available.
func savedAvailable(t *testing.T, c client, name string) snapshotJSON {
	t.Helper()
	var sn snapshotJSON
	wait.For(t, 30*time.Second, "saved snapshot "+name+" is available", func() bool {
		c.call("GET", "/v1/saved-snapshots/"+name, "", 200, &sn)
		return sn.Status == "available" || sn.Status == "failed"
	})
	if sn.Status != "available" {
		t.Fatalf("saved snapshot %s: %+v", name, sn)
	}
	return sn
}

// A key limited to a1 (or to team=a) cannot replace the account's
// template "tpl", a saved snapshot of b1, nor delete, read, start from or
// learn of it: 403 on saving under its label, and to everything else the
// answer a missing one gets. The owner's next sandbox from tpl still
// boots b1's disk. The keys' own saved snapshots work as before.
func TestAttackAPISavedSnapshots(t *testing.T) {
	t.Parallel()
	c, keys, _ := devWithKeys(t)
	c.call("POST", "/v1/sandboxes", `{"name": "b1", "ttl_secs": 0}`, 202, nil)
	c.call("POST", "/v1/sandboxes", `{"name": "a1", "ttl_secs": 0}`, 202, nil)
	var l1 struct{ Labels map[string]string }
	c.ask(keys.byLabel, "POST", "/v1/sandboxes", `{"name": "l1", "ttl_secs": 0}`).want(t, "the label key creates l1", 202, "")
	for _, n := range []string{"b1", "a1", "l1"} {
		runsWithin(t, c, n, 30*time.Second)
		write(t, c, n, n+"-state")
	}
	c.call("GET", "/v1/sandboxes/l1", "", 200, &l1)
	if l1.Labels["team"] != "a" {
		t.Fatalf("l1's labels: %v", l1.Labels)
	}
	c.call("POST", "/v1/sandboxes/b1/snapshots", `{"label": "tpl"}`, 202, nil)
	tpl := savedAvailable(t, c, "tpl")

	for _, k := range []struct{ name, key, box string }{{"by name", keys.byName, "a1"}, {"by label", keys.byLabel, "l1"}} {
		t.Run(k.name, func(t *testing.T) {
			c.ask(k.key, "POST", "/v1/sandboxes/"+k.box+"/snapshots", `{"label": "tpl"}`).
				want(t, "saving under another sandbox's label", 403, "api_key_sandbox_forbidden")
			// Held by another and missing: one answer.
			missing := c.ask(k.key, "GET", "/v1/saved-snapshots/nothing-here", "").want(t, "a missing one", 404, "not_found")
			for _, ask := range []struct{ method, path, body, ref string }{
				{"GET", "/v1/saved-snapshots/tpl", "", "tpl"},
				{"GET", "/v1/saved-snapshots/" + tpl.ID, "", tpl.ID},
				{"DELETE", "/v1/saved-snapshots/tpl", "", "tpl"},
				{"DELETE", "/v1/saved-snapshots/" + tpl.ID, "", tpl.ID},
				{"POST", "/v1/sandboxes", `{"name": "` + k.box + `-from", "from": "tpl"}`, "tpl"},
				{"POST", "/v1/sandboxes", `{"name": "` + k.box + `-from", "from": "` + tpl.ID + `"}`, tpl.ID},
			} {
				got := c.ask(k.key, ask.method, ask.path, ask.body).want(t, ask.method+" "+ask.path+" "+ask.body, 404, "not_found")
				if want := strings.ReplaceAll(missing.message, "nothing-here", ask.ref); got.message != want {
					t.Fatalf("%s %s: got %q, want the missing one's %q", ask.method, ask.path, got.message, want)
				}
			}
			// Fork and restore take only the key's own sandbox's snapshots.
			c.ask(k.key, "POST", "/v1/sandboxes/"+k.box+"/fork", `{"name": "`+k.box+`-f", "snapshot": "`+tpl.ID+`"}`).want(t, "fork with b1's snapshot", 404, "not_found")
			c.ask(k.key, "POST", "/v1/sandboxes/"+k.box+"/fork", `{"name": "`+k.box+`-f", "snapshot": "tpl"}`).want(t, "fork with tpl", 404, "not_found")
			c.ask(k.key, "POST", "/v1/sandboxes/"+k.box+"/restore", `{"snapshot": "`+tpl.ID+`"}`).want(t, "restore b1's snapshot", 404, "not_found")
			c.ask(k.key, "POST", "/v1/sandboxes/"+k.box+"/restore", `{"snapshot": "tpl"}`).want(t, "restore tpl", 404, "not_found")
			var list []snapshotJSON
			for _, path := range []string{"/v1/saved-snapshots", "/v1/snapshots"} {
				json.Unmarshal(c.ask(k.key, "GET", path, "").want(t, path, 200, "").body, &list)
				for _, sn := range list {
					if sn.ID == tpl.ID {
						t.Fatalf("%s lists b1's tpl to the limited key: %+v", path, list)
					}
				}
			}
			// Its own: saved, saved again under the same name (replaced),
			// read and started from.
			own := k.box + "-tpl"
			c.ask(k.key, "POST", "/v1/sandboxes/"+k.box+"/snapshots", `{"label": "`+own+`"}`).want(t, "saving its own", 202, "")
			first := savedAvailable(t, c, own)
			c.ask(k.key, "POST", "/v1/sandboxes/"+k.box+"/snapshots", `{"label": "`+own+`"}`).want(t, "saving its own again", 202, "")
			wait.For(t, 30*time.Second, "the second copy replaces the first", func() bool {
				var sn snapshotJSON
				json.Unmarshal(c.ask(k.key, "GET", "/v1/saved-snapshots/"+own, "").want(t, "its own", 200, "").body, &sn)
				return sn.ID != first.ID && sn.Status == "available"
			})
		})
	}

	// b1's template is whole: the same id, and a sandbox from it has b1's
	// files.
	if again := savedAvailable(t, c, "tpl"); again.ID != tpl.ID {
		t.Fatalf("tpl was replaced: %+v, was %+v", again, tpl)
	}
	c.call("POST", "/v1/sandboxes", `{"name": "from-tpl", "from": "tpl", "ttl_secs": 0}`, 202, nil)
	runsWithin(t, c, "from-tpl", 30*time.Second)
	if got := cat(t, c, "from-tpl"); got != "b1-state" {
		t.Fatalf("a sandbox from tpl has f.txt %q, want b1's", got)
	}
}

// A key limited by label (as one limited by name) sees none of the
// account's SSH keys; and an Idempotency-Key's answer is replayed only to
// a key that reaches what it made (422 idempotency_key_reused to
// another, as for a different request).
func TestAttackAPIAccountWide(t *testing.T) {
	t.Parallel()
	c, keys, _ := devWithKeys(t)
	line, _ := json.Marshal(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(testkit.NewKey(t).PublicKey()))) + " owner@laptop")
	c.call("POST", "/v1/ssh-keys", `{"public_key": `+string(line)+`}`, 201, nil)
	for _, k := range []struct{ name, key string }{{"owner", keys.owner}, {"by name", keys.byName}, {"by label", keys.byLabel}} {
		var out struct {
			SSHKeys []struct{ Name string } `json:"ssh_keys"`
		}
		json.Unmarshal(c.ask(k.key, "GET", "/v1/ssh-keys", "").want(t, k.name+" lists SSH keys", 200, "").body, &out)
		if want := map[bool]int{true: 1, false: 0}[k.key == keys.owner]; len(out.SSHKeys) != want {
			t.Errorf("the %s key sees %d SSH keys, want %d: %+v", k.name, len(out.SSHKeys), want, out.SSHKeys)
		}
	}

	// The owner's create with k1; the limited keys' same request, same key.
	first := c.ask(keys.owner, "POST", "/v1/sandboxes", `{"name": "idem"}`, "Idempotency-Key", "k1").want(t, "the owner's create", 202, "")
	for _, k := range []struct{ name, key string }{{"by name", keys.byName}, {"by label", keys.byLabel}} {
		got := c.ask(k.key, "POST", "/v1/sandboxes", `{"name": "idem"}`, "Idempotency-Key", "k1").want(t, k.name+" replays the owner's k1", 422, "idempotency_key_reused")
		if strings.Contains(string(got.body), "sbx_") || got.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the %s key got the owner's answer: %s", k.name, got.body)
		}
	}
	again := c.ask(keys.owner, "POST", "/v1/sandboxes", `{"name": "idem"}`, "Idempotency-Key", "k1").want(t, "the owner's replay", 202, "")
	if string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the owner's replay: %s, want %s", again.body, first.body)
	}
	// A limited key's own retry is replayed to it, and to the owner (who
	// reaches everything).
	mine := c.ask(keys.byLabel, "POST", "/v1/sandboxes", `{"name": "mine"}`, "Idempotency-Key", "k2").want(t, "the label key's create", 202, "")
	for _, k := range []string{keys.byLabel, keys.owner} {
		got := c.ask(k, "POST", "/v1/sandboxes", `{"name": "mine"}`, "Idempotency-Key", "k2").want(t, "a replay of the label key's create", 202, "")
		if string(got.body) != string(mine.body) {
			t.Fatalf("replay: %s, want %s", got.body, mine.body)
		}
	}
	c.ask(keys.byName, "POST", "/v1/sandboxes", `{"name": "mine"}`, "Idempotency-Key", "k2").want(t, "the name key replays the label key's", 422, "idempotency_key_reused")
}

// A sandbox whose SSH server is gone (its host controller was killed)
// is answered 502 sandbox_unreachable with a fixed message on exec,
// streamed exec, jobs and files: no address, port or SSH detail; the
// cause is in the API's log with the request id.
func TestAttackAPIUnreachable(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	hc, _ := start(t, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey)
	api, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froogusercontent.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
	c := client{t: t, base: m[1], key: key}
	c.call("POST", "/v1/sandboxes", `{"name": "gone", "ttl_secs": 0}`, 202, nil)
	runsWithin(t, c, "gone", 30*time.Second)
	var ep struct {
		Host string
		Port int
	}
	c.call("GET", "/v1/sandboxes/gone/ssh", "", 200, &ep)
	// The SSH server of the local driver lives in hostctl: kill it, so the
	// store still says running.
	hc.cmd.Process.Signal(syscall.SIGKILL)
	hc.cmd.Wait()

	const fixed = `cannot reach sandbox "gone"; try again, or stop and start it`
	for _, ask := range []struct{ name, method, path, body string }{
		{"exec", "POST", "/v1/sandboxes/gone/exec", `{"command": "true"}`},
		{"jobs", "GET", "/v1/sandboxes/gone/jobs", ""},
		{"job start", "POST", "/v1/sandboxes/gone/jobs", `{"command": "sleep 1"}`},
		{"files", "GET", "/v1/sandboxes/gone/files?path=.", ""},
		{"file content", "GET", "/v1/sandboxes/gone/files/content?path=f.txt", ""},
	} {
		t.Run(ask.name, func(t *testing.T) {
			var got apiAnswer
			wait.For(t, 20*time.Second, "a 502 once the tunnel sees the server gone", func() bool {
				got = c.ask(key, ask.method, ask.path, ask.body)
				return got.status == 502
			})
			got.want(t, ask.name, 502, "sandbox_unreachable")
			if got.message != fixed {
				t.Errorf("%s: message %q, want %q", ask.name, got.message, fixed)
			}
			for _, leak := range []string{ep.Host, ":" + strconv.Itoa(ep.Port), "dial", "ssh:", "tcp", "handshake"} {
				if strings.Contains(string(got.body), leak) {
					t.Errorf("%s: the answer holds %q: %s", ask.name, leak, got.body)
				}
			}
			id := got.header.Get("X-Request-Id")
			wait.For(t, 5*time.Second, "the cause in the log with "+id, func() bool {
				for _, l := range strings.Split(api.stderr.String(), "\n") {
					if strings.Contains(l, id) && strings.Contains(l, "(cause: ") && strings.Contains(l, ":"+strconv.Itoa(ep.Port)) {
						return true
					}
				}
				return false
			})
		})
	}
	// Streamed, the error line says the same.
	got := c.ask(key, "POST", "/v1/sandboxes/gone/exec", `{"command": "true", "stream": true}`)
	if got.status == 200 {
		if strings.Contains(string(got.body), ep.Host) || strings.Contains(string(got.body), "dial") {
			t.Errorf("the stream holds the cause: %s", got.body)
		}
	} else if got.status != 502 || got.message != fixed {
		t.Errorf("streamed exec: %d %s", got.status, got.body)
	}
}
