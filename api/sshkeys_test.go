package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

func pubLine(t testing.TB, key any, comment string) string {
	t.Helper()
	pub, err := ssh.NewPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	return line
}

func TestSSHKeys(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	edKey := testkit.NewKey(t)
	ed := testkit.AuthorizedKey(edKey) + " me@laptop"
	forEachStore(t, func(t *testing.T, e *env) {
		reader := e.key("reader", "account.read")
		boxKey := e.keyWith("box", func(k *store.APIKey) { k.Sandboxes = []string{"mine"} }, "*")
		team := e.keyWith("team", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, "*")

		bad := []struct {
			name string
			key  string
			body any
			code string
		}{
			{"no body", e.admin, nil, "invalid_json"},
			{"not json", e.admin, "{", "invalid_json"},
			{"unknown field", e.admin, map[string]any{"public_key": ed, "x": 1}, "unknown_field"},
			{"no key", e.admin, map[string]any{"name": "x"}, "invalid_value"},
			{"empty key", e.admin, map[string]any{"public_key": " "}, "invalid_value"},
			{"garbage", e.admin, map[string]any{"public_key": "ssh-ed25519 !!!"}, "invalid_value"},
			{"private key", e.admin, map[string]any{"public_key": "-----BEGIN OPENSSH PRIVATE KEY-----"}, "invalid_value"},
			{"two keys", e.admin, map[string]any{"public_key": ed + "\n" + ed}, "invalid_value"},
			{"options", e.admin, map[string]any{"public_key": `command="rm -rf ~" ` + ed}, "invalid_value"},
			{"weak rsa", e.admin, map[string]any{"public_key": pubLine(t, &weak.PublicKey, "")}, "invalid_value"},
			{"control in comment", e.admin, map[string]any{"public_key": ed + "\x1b[2J"}, "invalid_value"},
			{"long name", e.admin, map[string]any{"public_key": ed, "name": strings.Repeat("n", 101)}, "invalid_value"},
			{"empty name", e.admin, map[string]any{"public_key": ed, "name": ""}, "invalid_value"},
			{"name with newline", e.admin, map[string]any{"public_key": ed, "name": "a\nb"}, "invalid_value"},
			{"reader adds", reader, map[string]any{"public_key": ed}, "api_key_action_forbidden"},
			{"sandbox key adds", boxKey, map[string]any{"public_key": ed}, "api_key_sandbox_forbidden"},
			{"label key adds", team, map[string]any{"public_key": ed}, "api_key_sandbox_forbidden"},
		}
		for _, tt := range bad {
			r := e.do("POST", "/v1/ssh-keys", tt.key, tt.body)
			if r.status < 400 || r.code(t) != tt.code {
				t.Errorf("%s: got %d %s, want %s", tt.name, r.status, r.body, tt.code)
			}
		}
		var list struct {
			SSHKeys []map[string]any `json:"ssh_keys"`
		}
		e.do("GET", "/v1/ssh-keys", reader, nil).want(t, 200, "").json(t, &list)
		if len(list.SSHKeys) != 0 {
			t.Fatalf("refused adds left keys: %v", list.SSHKeys)
		}

		var k struct{ ID, Name, PublicKey, Fingerprint string }
		// A key pasted with its trailing newline; the name comes from its comment.
		e.do("POST", "/v1/ssh-keys", e.admin, map[string]any{"public_key": ed + "\n"}).want(t, 201, "").json(t, &k)
		if k.Name != "me@laptop" || k.Fingerprint != ssh.FingerprintSHA256(edKey.PublicKey()) || k.ID == "" {
			t.Fatalf("added: %+v", k)
		}
		e.do("POST", "/v1/ssh-keys", e.admin, map[string]any{"public_key": strings.TrimSuffix(ed, " me@laptop"), "name": "again"}).want(t, 409, "ssh_key_exists")
		e.do("POST", "/v1/ssh-keys", e.admin, map[string]any{"public_key": pubLine(t, &ec.PublicKey, ""), "name": "ci runner"}).want(t, 201, "")

		e.do("GET", "/v1/ssh-keys", reader, nil).want(t, 200, "").json(t, &list)
		if len(list.SSHKeys) != 2 || list.SSHKeys[0]["public_key"] != ed || list.SSHKeys[1]["name"] != "ci runner" {
			t.Fatalf("list: %v", list.SSHKeys)
		}
		// A key limited by name or by label sees nothing account-wide.
		for name, key := range map[string]string{"name": boxKey, "label": team} {
			list.SSHKeys = nil
			e.do("GET", "/v1/ssh-keys", key, nil).want(t, 200, "").json(t, &list)
			if list.SSHKeys == nil || len(list.SSHKeys) != 0 {
				t.Fatalf("a key limited by %s lists %v", name, list.SSHKeys)
			}
		}

		e.do("DELETE", "/v1/ssh-keys/"+k.ID, reader, nil).want(t, 403, "api_key_action_forbidden")
		e.do("DELETE", "/v1/ssh-keys/"+k.ID, boxKey, nil).want(t, 403, "api_key_sandbox_forbidden")
		e.do("DELETE", "/v1/ssh-keys/"+k.ID, e.admin, nil).want(t, 200, "")
		e.do("DELETE", "/v1/ssh-keys/"+k.ID, e.admin, nil).want(t, 404, "not_found")
		e.do("DELETE", "/v1/ssh-keys/sshkey_nope", e.admin, nil).want(t, 404, "not_found")

		var audit struct {
			Events []struct{ Action, Target string }
		}
		e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").json(t, &audit)
		var actions []string
		for _, ev := range audit.Events {
			if strings.HasPrefix(ev.Action, "ssh_key.") {
				actions = append(actions, ev.Action+" "+ev.Target)
			}
		}
		if want := "ssh_key.delete " + k.ID + "|ssh_key.create ci runner|ssh_key.create me@laptop"; strings.Join(actions, "|") != want {
			t.Fatalf("audit: %q, want %q", strings.Join(actions, "|"), want)
		}
	})
}

// GET /v1/sandboxes/{name}/ssh: where to log in, and the key to pin.
func TestSandboxSSH(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		e.do("GET", "/v1/sandboxes/box/ssh", e.admin, nil).want(t, 409, "conflict")
		e.do("GET", "/v1/sandboxes/nope/ssh", e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/BAD/ssh", e.admin, nil).want(t, 400, "invalid_value")
		e.do("GET", "/v1/sandboxes/box/ssh?x=1", e.admin, nil).want(t, 400, "invalid_query")
		e.do("GET", "/v1/sandboxes/box/ssh", e.key("reader", "sandbox.read"), nil).want(t, 403, "api_key_action_forbidden")
		sb, err := e.store.Sandbox(context.Background(), e.account.ID, "box")
		if err != nil {
			t.Fatal(err)
		}
		hostKey := pubLine(t, ed25519.PublicKey(make([]byte, 32)), "")
		if _, err := e.store.UpdateSandbox(context.Background(), sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
			s.State, s.SSHHost, s.SSHPort, s.SSHHostKey = store.StateRunning, "127.0.0.1", 2222, hostKey
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Host, User, HostKey, KnownHosts string
			Port                            int
		}
		r := e.do("GET", "/v1/sandboxes/box/ssh", e.key("ssh", "ssh"), nil).want(t, 200, "")
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Host != "127.0.0.1" || got.Port != 2222 || got.User != "user" || !strings.Contains(string(r.body), `"host_key":"`+hostKey+`"`) ||
			!strings.Contains(string(r.body), `"known_hosts":"[127.0.0.1]:2222 `+hostKey+`"`) {
			t.Fatalf("ssh: %s", r.body)
		}
	})
}

func FuzzParseSSHKey(f *testing.F) {
	ed := testkit.AuthorizedKey(testkit.NewKey(f))
	for _, s := range []string{ed + " me@laptop", "ssh-rsa AAAA", `no-pty ` + ed, "", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		line, comment, fp, err := api.ParseSSHKey(in)
		if err != nil {
			if line != "" || fp != "" {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		// What is accepted parses again to itself: one clean line.
		again, comment2, fp2, err := api.ParseSSHKey(line)
		if err != nil || again != line || fp2 != fp || comment2 != comment || strings.ContainsAny(line, "\r\n\x00") {
			t.Fatalf("%q → %q, again %q %v", in, line, again, err)
		}
	})
}
