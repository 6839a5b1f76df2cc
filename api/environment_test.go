package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
)

// envState is what the API shows of the account's environment, to
// compare before and after a refused request.
func envState(t *testing.T, e *env) string {
	t.Helper()
	a := e.do("GET", "/v1/env", e.admin, nil).want(t, 200, "")
	b := e.do("GET", "/v1/environment", e.admin, nil).want(t, 200, "")
	return string(a.body) + "\n" + string(b.body)
}

// envContent is envState without when the environment last changed.
func envContent(t *testing.T, e *env) string {
	t.Helper()
	var v map[string]any
	e.do("GET", "/v1/environment", e.admin, nil).want(t, 200, "").json(t, &v)
	delete(v, "updated_at")
	b, _ := json.Marshal(v)
	return string(e.do("GET", "/v1/env", e.admin, nil).body) + "\n" + string(b)
}

// The account's variables: names and masked previews only, the docs'
// limits as a 400 that changes nothing, the scopes, the audit log.
func TestEnvVariables(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const secret = "sk-ant-api03-very-secret-value"
		reader := e.key("reader", "environment.read")
		noEnv := e.key("sandboxes", "sandbox.read")
		boxKey := e.keyWith("box", func(k *store.APIKey) { k.Sandboxes = []string{"mine"} }, "*")

		e.do("PUT", "/v1/env/ANTHROPIC_API_KEY", e.admin, map[string]string{"value": secret}).want(t, 200, "")
		e.do("PUT", "/v1/env/SHORT", e.admin, `{"value":"abc"}`).want(t, 200, "")
		before := envContent(t, e)
		for i := range 48 {
			e.do("PUT", fmt.Sprintf("/v1/env/V%d", i), e.admin, `{"value":"x"}`).want(t, 200, "")
		}
		full := envState(t, e)
		bad := []struct {
			name, method, path, key string
			body                    any
			status                  int
			code                    string
		}{
			{"digit first", "PUT", "/v1/env/1A", e.admin, `{"value":"x"}`, 400, "invalid_value"},
			{"dash", "PUT", "/v1/env/A-B", e.admin, `{"value":"x"}`, 400, "invalid_value"},
			{"long name", "PUT", "/v1/env/" + strings.Repeat("A", 129), e.admin, `{"value":"x"}`, 400, "invalid_value"},
			{"no value", "PUT", "/v1/env/A", e.admin, `{}`, 400, "invalid_value"},
			{"null value", "PUT", "/v1/env/A", e.admin, `{"value":null}`, 400, "invalid_value"},
			{"number", "PUT", "/v1/env/A", e.admin, `{"value":5}`, 400, "invalid_type"},
			{"NUL", "PUT", "/v1/env/A", e.admin, `{"value":"a\u0000b"}`, 400, "invalid_value"},
			{"unknown field", "PUT", "/v1/env/A", e.admin, `{"value":"x","secret":true}`, 400, "unknown_field"},
			{"not json", "PUT", "/v1/env/A", e.admin, `{`, 400, "invalid_json"},
			{"51st", "PUT", "/v1/env/ONE_MORE", e.admin, `{"value":"x"}`, 400, "invalid_value"},
			{"16 KiB", "PUT", "/v1/env/V0", e.admin, map[string]string{"value": strings.Repeat("v", 16<<10)}, 400, "invalid_value"},
			{"reader sets", "PUT", "/v1/env/A", reader, `{"value":"x"}`, 403, "api_key_action_forbidden"},
			{"reader removes", "DELETE", "/v1/env/SHORT", reader, nil, 403, "api_key_action_forbidden"},
			{"limited key sets", "PUT", "/v1/env/V0", boxKey, `{"value":"x"}`, 403, "api_key_sandbox_forbidden"},
			{"limited key removes", "DELETE", "/v1/env/V0", boxKey, nil, 403, "api_key_sandbox_forbidden"},
			{"no scope lists", "GET", "/v1/env", noEnv, nil, 403, "api_key_action_forbidden"},
			{"query", "GET", "/v1/env?all=1", e.admin, nil, 400, "invalid_query"},
			{"remove missing", "DELETE", "/v1/env/NOPE", e.admin, nil, 404, "not_found"},
			{"remove bad name", "DELETE", "/v1/env/1A", e.admin, nil, 400, "invalid_value"},
		}
		for _, tt := range bad {
			e.do(tt.method, tt.path, tt.key, tt.body).want(t, tt.status, tt.code)
			if got := envState(t, e); got != full {
				t.Fatalf("%s changed the environment:\n%s\nwant\n%s", tt.name, got, full)
			}
		}
		for i := range 48 {
			e.do("DELETE", fmt.Sprintf("/v1/env/V%d", i), e.admin, nil).want(t, 200, "")
		}
		if got := envContent(t, e); got != before {
			t.Fatalf("after removing: %s, want %s", got, before)
		}

		var list struct {
			Variables []struct{ Name, Preview string }
		}
		e.do("GET", "/v1/env", reader, nil).want(t, 200, "").json(t, &list)
		if len(list.Variables) != 2 || list.Variables[0].Name != "ANTHROPIC_API_KEY" || list.Variables[0].Preview != "sk-a…" ||
			list.Variables[1].Name != "SHORT" || list.Variables[1].Preview != "…" {
			t.Fatalf("list: %+v", list.Variables)
		}
		// Replacing keeps one entry.
		e.do("PUT", "/v1/env/SHORT", e.admin, `{"value":"abcd"}`).want(t, 200, "")
		e.do("GET", "/v1/env", reader, nil).json(t, &list)
		if len(list.Variables) != 2 {
			t.Fatalf("after a replace: %+v", list.Variables)
		}
		var audit struct {
			Events []struct {
				Action, Target string
				Detail         map[string]string
			}
		}
		e.do("GET", "/v1/audit?limit=200", e.admin, nil).want(t, 200, "").json(t, &audit)
		if ev := audit.Events[0]; ev.Action != "env.set" || ev.Target != "SHORT" {
			t.Fatalf("audit: newest %+v", ev)
		}
		// No value in the clear: answers, audit, logs, the store's record.
		rec, _ := e.store.Environment(context.Background(), e.account.ID)
		b, _ := json.Marshal(rec)
		audited := e.do("GET", "/v1/audit?limit=200", e.admin, nil)
		for _, s := range []string{envState(t, e), string(audited.body), e.logs.String(), string(b)} {
			if strings.Contains(s, secret) || strings.Contains(s, "very-secret") {
				t.Fatalf("a value in the clear: %.300s", s)
			}
		}
	})
}

// Repos, the setup script and secret files: their limits and shapes as
// 400s that change nothing; contents never shown again.
func TestEnvironmentRepoFilesSetup(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		reader := e.key("reader", "environment.read", "account.admin")
		e.do("PATCH", "/v1/environment", e.admin, `{"repos":[{"url":"https://github.com/you/app","branch":"main"},{"url":"git@github.com:you/lib.git"}],"setup":"cd ~/app && npm ci"}`).want(t, 200, "")
		content := "TOKEN=file-secret-content\n"
		e.do("PUT", "/v1/environment/files", e.admin, map[string]string{"path": "app/.env", "content": content}).want(t, 200, "")
		e.do("PUT", "/v1/environment/files", e.admin, map[string]string{"path": "~/.npmrc", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), "encoding": "base64"}).want(t, 200, "")
		var got struct {
			Repos []struct{ URL, Branch string }
			Setup *string
			Files []struct {
				Path string
				Size int
			}
		}
		r := e.do("GET", "/v1/environment", reader, nil).want(t, 200, "")
		r.json(t, &got)
		if len(got.Repos) != 2 || got.Repos[0].Branch != "main" || got.Setup == nil || *got.Setup != "cd ~/app && npm ci" ||
			len(got.Files) != 2 || got.Files[0].Path != ".npmrc" || got.Files[0].Size != 3 || got.Files[1].Path != "app/.env" || got.Files[1].Size != len(content) {
			t.Fatalf("environment: %s", r.body)
		}
		state, content := envState(t, e), envContent(t, e)
		big := strings.Repeat("x", 64<<10+1)
		manyRepos := make([]map[string]string, 21)
		for i := range manyRepos {
			manyRepos[i] = map[string]string{"url": fmt.Sprintf("https://github.com/you/r%d", i)}
		}
		bad := []struct {
			name, method, path string
			body               any
			status             int
			code               string
		}{
			{"empty patch", "PATCH", "/v1/environment", `{}`, 400, "invalid_value"},
			{"repos not array", "PATCH", "/v1/environment", `{"repos":"https://github.com/a/b"}`, 400, "invalid_type"},
			{"token in url", "PATCH", "/v1/environment", `{"repos":[{"url":"https://ghp_abc@github.com/you/app"}]}`, 400, "invalid_value"},
			{"password in ssh url", "PATCH", "/v1/environment", `{"repos":[{"url":"ssh://git:pw@github.com/you/app"}]}`, 400, "invalid_value"},
			{"http", "PATCH", "/v1/environment", `{"repos":[{"url":"http://github.com/you/app"}]}`, 400, "invalid_value"},
			{"file", "PATCH", "/v1/environment", `{"repos":[{"url":"file:///etc"}]}`, 400, "invalid_value"},
			{"fragment", "PATCH", "/v1/environment", `{"repos":[{"url":"https://github.com/you/app#main"}]}`, 400, "invalid_value"},
			{"no repo name", "PATCH", "/v1/environment", `{"repos":[{"url":"https://github.com/"}]}`, 400, "invalid_value"},
			{"dotdot", "PATCH", "/v1/environment", `{"repos":[{"url":"https://github.com/you/.."}]}`, 400, "invalid_value"},
			{"option-like", "PATCH", "/v1/environment", `{"repos":[{"url":"-uhttps://github.com/you/app"}]}`, 400, "invalid_value"},
			{"option user", "PATCH", "/v1/environment", `{"repos":[{"url":"-oProxyCommand=x@github.com:you/app"}]}`, 400, "invalid_value"},
			{"option ssh user", "PATCH", "/v1/environment", `{"repos":[{"url":"ssh://-oProxyCommand=x@github.com/you/app"}]}`, 400, "invalid_value"},
			{"option host", "PATCH", "/v1/environment", `{"repos":[{"url":"git@-oProxyCommand=x:you/app"}]}`, 400, "invalid_value"},
			{"bad branch", "PATCH", "/v1/environment", `{"repos":[{"url":"https://github.com/you/app","branch":"a..b"}]}`, 400, "invalid_value"},
			{"dash branch", "PATCH", "/v1/environment", `{"repos":[{"url":"https://github.com/you/app","branch":"--upload-pack=x"}]}`, 400, "invalid_value"},
			{"same directory", "PATCH", "/v1/environment", `{"repos":[{"url":"https://github.com/you/app"},{"url":"https://gitlab.com/me/app.git"}]}`, 400, "invalid_value"},
			{"21 repos", "PATCH", "/v1/environment", map[string]any{"repos": manyRepos}, 400, "invalid_value"},
			{"big setup", "PATCH", "/v1/environment", map[string]any{"setup": big}, 400, "invalid_value"},
			{"NUL setup", "PATCH", "/v1/environment", `{"setup":"a\u0000"}`, 400, "invalid_value"},
			{"unknown field", "PATCH", "/v1/environment", `{"files":[]}`, 400, "unknown_field"},
			{"no path", "PUT", "/v1/environment/files", `{"content":"x"}`, 400, "invalid_value"},
			{"absolute", "PUT", "/v1/environment/files", `{"path":"/etc/passwd","content":"x"}`, 400, "invalid_value"},
			{"escapes", "PUT", "/v1/environment/files", `{"path":"app/../../x","content":"x"}`, 400, "invalid_value"},
			{"empty part", "PUT", "/v1/environment/files", `{"path":"app//x","content":"x"}`, 400, "invalid_value"},
			{"newline", "PUT", "/v1/environment/files", `{"path":"a\nb","content":"x"}`, 400, "invalid_value"},
			{"bad base64", "PUT", "/v1/environment/files", `{"path":"a","content":"!!","encoding":"base64"}`, 400, "invalid_value"},
			{"bad encoding", "PUT", "/v1/environment/files", `{"path":"a","content":"x","encoding":"hex"}`, 400, "invalid_value"},
			{"big file", "PUT", "/v1/environment/files", map[string]string{"path": "big", "content": big}, 400, "invalid_value"},
			{"remove no path", "DELETE", "/v1/environment/files", nil, 400, "invalid_value"},
			{"remove missing", "DELETE", "/v1/environment/files?path=nope", nil, 404, "not_found"},
			{"remove bad path", "DELETE", "/v1/environment/files?path=../x", nil, 400, "invalid_value"},
			{"remove unknown query", "DELETE", "/v1/environment/files?path=a&x=1", nil, 400, "invalid_query"},
		}
		for _, tt := range bad {
			e.do(tt.method, tt.path, e.admin, tt.body).want(t, tt.status, tt.code)
			if got := envState(t, e); got != state {
				t.Fatalf("%s changed the environment:\n%s\nwant\n%s", tt.name, got, state)
			}
		}
		// 1 MiB of files together: the 17th of 64 KiB is refused.
		chunk := strings.Repeat("y", 64<<10)
		for i := range 15 {
			e.do("PUT", "/v1/environment/files", e.admin, map[string]string{"path": fmt.Sprintf("f/%d", i), "content": chunk}).want(t, 200, "")
		}
		e.do("PUT", "/v1/environment/files", e.admin, map[string]string{"path": "f/last", "content": chunk}).want(t, 400, "invalid_value")
		for i := range 15 {
			e.do("DELETE", fmt.Sprintf("/v1/environment/files?path=f/%d", i), e.admin, nil).want(t, 200, "")
		}
		if got := envContent(t, e); got != content {
			t.Fatalf("after removing: %s, want %s", got, content)
		}
		// Scopes: reading needs environment.read, changing environment.write.
		e.do("GET", "/v1/environment", e.key("none", "sandbox.read"), nil).want(t, 403, "api_key_action_forbidden")
		e.do("PATCH", "/v1/environment", reader, `{"setup":""}`).want(t, 403, "api_key_action_forbidden")
		e.do("PUT", "/v1/environment/files", reader, `{"path":"a","content":"x"}`).want(t, 403, "api_key_action_forbidden")
		e.do("DELETE", "/v1/environment/files?path=app/.env", reader, nil).want(t, 403, "api_key_action_forbidden")

		e.do("PATCH", "/v1/environment", e.admin, `{"setup":""}`).want(t, 200, "").json(t, &got)
		if got.Setup != nil || len(got.Repos) != 2 {
			t.Fatalf("setup removed: %+v", got)
		}
		rec, _ := e.store.Environment(context.Background(), e.account.ID)
		b, _ := json.Marshal(rec)
		for _, s := range []string{envState(t, e), e.logs.String(), string(b), string(e.do("GET", "/v1/audit?limit=200", e.admin, nil).body)} {
			if strings.Contains(s, "file-secret-content") {
				t.Fatalf("a file's content in the clear: %.300s", s)
			}
		}
	})
}

// The account's variables reach a sandbox's commands under its own, as
// they were at its start; environment: false sandboxes and their forks
// get none.
func TestAccountEnvReachesCommands(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.do("PUT", "/v1/env/A", e.admin, `{"value":"account a"}`).want(t, 200, "")
		e.do("PUT", "/v1/env/B", e.admin, `{"value":"account b"}`).want(t, 200, "")
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box","env":{"B":"own b"}}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"bare","environment":false,"env":{"B":"own b"}}`).want(t, 202, "")
		e.waitState("box", "running")
		e.waitState("bare", "running")
		e.do("POST", "/v1/sandboxes/bare/fork", e.admin, `{"name":"bare-2"}`).want(t, 202, "")
		e.waitState("bare-2", "running")
		cmd := map[string]any{"command": `printf '%s|%s|%s' "${A-unset}" "$B" "${C-unset}"`, "env": map[string]string{"C": "req c"}}
		for name, want := range map[string]string{"box": "account a|own b|req c", "bare": "unset|own b|req c", "bare-2": "unset|own b|req c"} {
			if got := e.exec(name, cmd).Stdout; got != want {
				t.Errorf("%s: got %q, want %q", name, got, want)
			}
		}
		// A change reaches a running sandbox at its next start, not before.
		e.do("PUT", "/v1/env/A", e.admin, `{"value":"account a2"}`).want(t, 200, "")
		if got := e.exec("box", cmd).Stdout; got != "account a|own b|req c" {
			t.Errorf("box before its next start: got %q", got)
		}
		e.do("POST", "/v1/sandboxes/box/stop", e.admin, nil).want(t, 202, "")
		e.waitState("box", "stopped")
		e.do("POST", "/v1/sandboxes/box/start", e.admin, nil).want(t, 202, "")
		e.waitState("box", "running")
		if got := e.exec("box", cmd).Stdout; got != "account a2|own b|req c" {
			t.Errorf("box after its next start: got %q", got)
		}
	})
}

func FuzzParseRepo(f *testing.F) {
	for _, s := range []string{"https://github.com/you/app", "git@github.com:you/app.git", "ssh://git@host/x/y", "https://t@github.com/a/b",
		"https://github.com/a/b#x", "file:///x", "", "-x", "https://github.com/a/..", "git@h:a/../b"} {
		f.Add(s, "main")
	}
	f.Fuzz(func(t *testing.T, url, branch string) {
		dir, err := api.ParseRepo(url, branch)
		if err != nil {
			if dir != "" {
				t.Fatalf("error %v with a directory %q", err, dir)
			}
			return
		}
		// What is accepted names a directory that stays in ~, and holds
		// no credentials, space or option.
		if dir == "" || dir == "." || dir == ".." || strings.ContainsAny(dir, "/\\ \x00") || strings.HasPrefix(dir, "-") || strings.HasPrefix(url, "-") || strings.HasPrefix(branch, "-") {
			t.Fatalf("%q %q → %q", url, branch, dir)
		}
		if strings.HasPrefix(url, "https://") && strings.Contains(strings.SplitN(url[8:], "/", 2)[0], "@") {
			t.Fatalf("%q: credentials accepted", url)
		}
		// Nothing ssh could read as an option: no user or host after
		// "ssh://" or before "@" that starts with '-'.
		if strings.Contains(url, "@-") || strings.HasPrefix(strings.TrimPrefix(url, "ssh://"), "-") {
			t.Fatalf("%q: an option-like user or host accepted", url)
		}
	})
}

func FuzzParseHomePath(f *testing.F) {
	for _, s := range []string{"app/.env", "~/.npmrc", "/etc/passwd", "../x", "a//b", "a/./b", "", "a\nb", ".ssh/id_ed25519"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := api.ParseHomePath(in)
		if err != nil {
			return
		}
		// What is accepted stays inside ~ and parses again to itself.
		if strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") || strings.Contains(p, "//") || strings.ContainsAny(p, "\x00\n\r\\") {
			t.Fatalf("%q → %q", in, p)
		}
		if again, err := api.ParseHomePath(p); (err != nil || again != p) && !strings.HasPrefix(p, "~/") {
			t.Fatalf("%q → %q, again %q %v", in, p, again, err)
		}
	})
}
