package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"froog.tech/froog/store"
)

// A create's files, repo and setup that break a rule are refused with a
// 400 that says which, and nothing is made: no sandbox, no audit event.
func TestCreateFirstBootRefused(t *testing.T) {
	many := map[string]string{}
	for i := range store.MaxSandboxFiles + 1 {
		many[fmt.Sprintf("f%d", i)] = "x"
	}
	manyJSON, _ := json.Marshal(map[string]any{"name": "box", "files": many})
	half := strings.Repeat("a", store.MaxSandboxFilesBytes/2+1)
	tooBig, _ := json.Marshal(map[string]any{"name": "box", "files": map[string]string{"a": half, "b": half}})
	longScript, _ := json.Marshal(map[string]any{"name": "box", "setup": strings.Repeat("x", store.MaxEnvSetupBytes+1)})
	cases := []struct{ name, body, code, msg string }{
		{"files a string", `{"name":"box","files":"app/.env=x"}`, "invalid_type", "files must be"},
		{"files content a number", `{"name":"box","files":{"a":1}}`, "invalid_type", "files must map"},
		{"list item unknown field", `{"name":"box","files":[{"path":"a","content":"x","mode":"600"}]}`, "unknown_field", "files: unknown field"},
		{"list item without content", `{"name":"box","files":[{"path":"a"}]}`, "invalid_value", "files[0]: path and content are required"},
		{"absolute path", `{"name":"box","files":{"/etc/passwd":"x"}}`, "invalid_value", "is relative to ~"},
		{"path out of ~", `{"name":"box","files":{"app/../../x":"x"}}`, "invalid_value", "must stay inside ~"},
		{"path twice", `{"name":"box","files":[{"path":"a","content":"1"},{"path":"~/a","content":"2"}]}`, "invalid_value", "~/a is given twice"},
		{"bad base64", `{"name":"box","files":[{"path":"a","content":"!!","encoding":"base64"}]}`, "invalid_value", "not base64"},
		{"bad encoding", `{"name":"box","files":[{"path":"a","content":"x","encoding":"hex"}]}`, "invalid_value", "utf-8 or base64"},
		{"21 files", string(manyJSON), "invalid_value", "at most 20 files"},
		{"over 1 MiB", string(tooBig), "invalid_value", "1 MiB together"},
		{"repo without url", `{"name":"box","repo":{"branch":"main"}}`, "invalid_value", "repo.url is required"},
		{"repo a string", `{"name":"box","repo":"https://github.com/you/app"}`, "invalid_type", "repo"},
		{"repo token in url", `{"name":"box","repo":{"url":"https://ghp_abc123@github.com/you/app"}}`, "invalid_value", "must not hold credentials"},
		{"repo password in url", `{"name":"box","repo":{"url":"https://you:ghp_abc123@github.com/you/app"}}`, "invalid_value", "must not hold credentials"},
		{"repo branch in url", `{"name":"box","repo":{"url":"https://github.com/you/app#pr-42"}}`, "invalid_value", "a branch goes in branch"},
		{"repo bad branch", `{"name":"box","repo":{"url":"https://github.com/you/app","branch":"-x"}}`, "invalid_value", "not a git branch name"},
		{"repo file scheme", `{"name":"box","repo":{"url":"file:///srv/app"}}`, "invalid_value", "url must be https://"},
		{"repo dir out of ~", `{"name":"box","repo":{"url":"https://github.com/you/app","dir":"../x"}}`, "invalid_value", "repo.dir: must stay inside ~"},
		{"repo unknown field", `{"name":"box","repo":{"url":"https://github.com/you/app","ref":"x"}}`, "unknown_field", "ref"},
		{"setup a list", `{"name":"box","setup":["make"]}`, "invalid_type", "setup"},
		{"setup NUL", `{"name":"box","setup":"echo \u0000"}`, "invalid_value", "NUL"},
		{"setup over 64 KiB", string(longScript), "invalid_value", "at most 64 KiB"},
		{"fork with files", `{"name":"copy","files":{"a":"x"}}`, "unsupported_field", "a fork does not take files"},
	}
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"src"}`).want(t, 202, "")
		before := accountNow(t, e)
		for _, tc := range cases {
			path := "/v1/sandboxes"
			if strings.HasPrefix(tc.name, "fork") {
				path = "/v1/sandboxes/src/fork"
			}
			r := e.do("POST", path, e.admin, tc.body).want(t, 400, tc.code)
			if !strings.Contains(string(r.body), tc.msg) {
				t.Errorf("%s: %s, want a message with %q", tc.name, r.body, tc.msg)
			}
		}
		if after := accountNow(t, e); after != before {
			t.Fatalf("a refused create changed the account:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// A create's files and setup are sealed on the record until the first
// boot (never shown, logged, audited or in the clear on the feed), its
// repo is shown; a fork gets none of it, and copies (count) each get
// their own sealed to them.
func TestCreateFirstBootStored(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const secret = "s3cr3t-file-content"
		body := map[string]any{
			"name": "box",
			"files": []map[string]string{
				{"path": "app/.env", "content": "TOKEN=" + secret},
				{"path": "~/bin/tool", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 's'}), "encoding": "base64"},
			},
			"repo":  map[string]string{"url": "https://github.com/you/app", "branch": "pr-42", "dir": "src/app"},
			"setup": "echo " + secret + "-script",
		}
		var sb struct {
			Repo map[string]string `json:"repo"`
		}
		r := e.do("POST", "/v1/sandboxes", e.admin, body).want(t, 202, "")
		r.json(t, &sb)
		if got := fmt.Sprint(sb.Repo); got != "map[branch:pr-42 dir:src/app url:https://github.com/you/app]" {
			t.Fatalf("repo shown: %s, want url, branch and dir", got)
		}
		ctx := context.Background()
		rec, err := e.store.Sandbox(ctx, e.account.ID, "box")
		if err != nil {
			t.Fatal(err)
		}
		fb := rec.FirstBoot
		if fb == nil || len(fb.Files) != 2 || fb.Files[0].Path != "app/.env" || fb.Files[1].Path != "bin/tool" || fb.Files[1].Size != 4 ||
			fb.SetupSize != len("echo "+secret+"-script") || len(fb.SetupSealed) == 0 {
			t.Fatalf("the record's first boot: %+v", fb)
		}
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, `{"name":"copy"}`).want(t, 202, "")
		var fork struct {
			Repo json.RawMessage `json:"repo"`
		}
		e.do("GET", "/v1/sandboxes/copy", e.admin, nil).want(t, 200, "").json(t, &fork)
		if string(fork.Repo) != "null" {
			t.Fatalf("the fork's repo: %s, want null (its disk has the clone)", fork.Repo)
		}
		copyRec, _ := e.store.Sandbox(ctx, e.account.ID, "copy")
		if copyRec.FirstBoot != nil || copyRec.Repo != nil {
			t.Fatalf("the fork's record: first boot %+v, repo %+v; want none", copyRec.FirstBoot, copyRec.Repo)
		}
		if got := strings.Join(copyRec.OwnFiles, ","); got != "app/.env,bin/tool" || strings.Join(rec.OwnFiles, ",") != got {
			t.Fatalf("own files: the fork's %q, the source's %q; want both app/.env,bin/tool (paths, kept from the account's files)", got, rec.OwnFiles)
		}

		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "many", "count": 2, "files": map[string]string{".npmrc": secret}}).want(t, 202, "")
		var sealed [][]byte
		for _, name := range []string{"many-1", "many-2"} {
			c, _ := e.store.Sandbox(ctx, e.account.ID, name)
			if c.FirstBoot == nil || len(c.FirstBoot.Files) != 1 {
				t.Fatalf("%s: first boot %+v, want its file", name, c.FirstBoot)
			}
			sealed = append(sealed, c.FirstBoot.Files[0].Sealed)
		}
		if string(sealed[0]) == string(sealed[1]) {
			t.Fatal("two copies hold the same sealed file: each is sealed to its own sandbox")
		}

		seen := append([]string{snapshot(t, e), string(r.body), e.logs.String()}, feedChanges(t, e)...)
		recDoc, _ := json.Marshal(rec)
		seen = append(seen, string(recDoc))
		for _, s := range seen {
			if strings.Contains(s, secret) {
				t.Fatalf("a file's content or the script is in the clear: %s", s)
			}
		}
		if !strings.Contains(seen[0], `"files":"2"`) || !strings.Contains(seen[0], `"repo":"https://github.com/you/app#pr-42"`) {
			t.Fatalf("the create's audit event does not say what it asked for: %s", seen[0])
		}
	})
}

// accountNow is the account's sandboxes and audit log, to compare.
func accountNow(t *testing.T, e *env) string {
	t.Helper()
	return string(e.do("GET", "/v1/sandboxes", e.admin, nil).want(t, 200, "").body) + "\n" +
		string(e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").body)
}

// feedChanges is every change on the store's feed so far, as JSON.
func feedChanges(t *testing.T, e *env) []string {
	t.Helper()
	ctx := context.Background()
	sub, err := e.store.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := e.store.Head(ctx)
	var out []string
	for sub.Seq() < head {
		c, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(c)
		out = append(out, string(b))
	}
	return out
}
