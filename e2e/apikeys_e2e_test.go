package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/store/pg/pgtest"
)

type e2eKey struct {
	ID        string            `json:"id"`
	Label     string            `json:"label"`
	Key       string            `json:"key"`
	Actions   []string          `json:"actions"`
	Sandboxes []string          `json:"sandboxes"`
	Labels    map[string]string `json:"labels"`
	ExpiresAt *time.Time        `json:"expires_at"`
}

// errCode sends a request with key and checks its status and error code.
func (c client) errCode(method, path, key, body string, status int, code string) {
	c.t.Helper()
	got, b := c.send(method, path, key, []byte(body))
	var e struct{ Error struct{ Code string } }
	json.Unmarshal(b, &e)
	if got != status || (code != "" && e.Error.Code != code) {
		shown, _, _ := strings.Cut(path, "?") // a signed link's query is its token
		c.t.Fatalf("%s %s: got %d %s, want %d %s", method, shown, got, b, status, code)
	}
}

// The API keys issue through the real binary on Postgres, with two API
// processes on one database: a key makes a scoped key, which works on
// both; rotated, its old secret and the links it made stop on both at
// once, and id, scope and expiry stay; revoked on one process, it is 401
// on the other at its next request, its sandbox stays; an expired key
// can't be rotated; a limited key sees no keys; a key can't make one
// wider than itself; the operator lists, rotates and revokes with froogd
// admin api-key, audited.
func TestAPIKeysEndToEnd(t *testing.T) {
	t.Parallel()
	o := pgtest.Schema(t)
	db := pgtest.URLWithSchema(o)
	froogdRun(t, "migrate", "--database-url", db)
	acct := froogdRun(t, "admin", "create-account", "--database-url", db, "--name", "acme")
	admin := froogdRun(t, "admin", "api-key", "create", "--database-url", db, "--account", acct, "--preset", "admin")
	ctlKey := writeControlKey(t)
	secret := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(secret, bytes.Repeat([]byte{5}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1",
		"--data", t.TempDir(), "--control-key-file", ctlKey)
	apiOn := func() client {
		_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
			"--domain", "froogusercontent.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
		return client{t: t, base: m[1], key: admin}
	}
	one, two := apiOn(), apiOn()

	var k e2eKey
	one.call("POST", "/v1/api-keys", `{"label": "agent", "preset": "ci", "labels": {"team": "a"}, "ttl_days": 30}`, 201, &k)
	if !strings.HasPrefix(k.Key, api.KeyPrefix) || k.ExpiresAt == nil || k.Labels["team"] != "a" {
		t.Fatalf("create: %+v", k)
	}
	agent1, agent2 := client{t: t, base: one.base, key: k.Key}, client{t: t, base: two.base, key: k.Key}
	agent1.call("POST", "/v1/sandboxes", `{"name": "box"}`, 202, nil)
	var sb struct{ State string }
	if !wait.Until(60*time.Second, func() bool {
		agent2.call("GET", "/v1/sandboxes/box", "", 200, &sb)
		return sb.State == "running"
	}) {
		t.Fatalf("box never ran: %+v", sb)
	}
	if code, b := agent1.send("PUT", "/v1/sandboxes/box/files/content?path=out.txt", k.Key, []byte("the result")); code != 200 {
		t.Fatalf("put a file: %d %s", code, b)
	}
	link := func(c client) string {
		t.Helper()
		var l struct{ URL string }
		c.call("POST", "/v1/sandboxes/box/files/download-url", `{"path": "out.txt"}`, 200, &l)
		return l.URL
	}
	fetch := func(c client, u string, want int, code string) {
		t.Helper()
		c.errCode("GET", c.base+u[strings.Index(u, "/v1/"):], "", "", want, code)
	}
	before := link(agent1)
	fetch(two, before, 200, "")

	// A key can't make one wider than itself; a limited key sees no keys.
	var p e2eKey
	one.call("POST", "/v1/api-keys", `{"label": "team-admin", "actions": ["account.admin", "sandbox.read"], "labels": {"team": "a"}, "ttl_days": 10}`, 201, &p)
	var boxOnly e2eKey
	one.call("POST", "/v1/api-keys", `{"label": "box-admin", "preset": "admin", "sandboxes": ["box"]}`, 201, &boxOnly)
	for _, tt := range []struct {
		parent, body, code string
	}{
		{p.Key, `{"preset": "ci", "labels": {"team": "a"}, "ttl_days": 5}`, "api_key_action_forbidden"},
		{boxOnly.Key, `{"sandboxes": ["box", "other"]}`, "api_key_sandbox_forbidden"},
		{p.Key, `{"actions": ["sandbox.read"], "ttl_days": 5}`, "api_key_label_forbidden"},
		{p.Key, `{"actions": ["sandbox.read"], "labels": {"team": "a"}, "ttl_days": 30}`, "api_key_expiry_forbidden"},
		{k.Key, `{"actions": ["sandbox.read"], "labels": {"team": "a"}, "ttl_days": 5}`, "api_key_action_forbidden"}, // ci has no account.admin
	} {
		two.errCode("POST", "/v1/api-keys", tt.parent, tt.body, 403, tt.code)
	}
	var narrow e2eKey
	client{t: t, base: two.base, key: p.Key}.call("POST", "/v1/api-keys", `{"actions": ["sandbox.read"], "labels": {"team": "a"}, "ttl_days": 5}`, 201, &narrow)
	client{t: t, base: one.base, key: narrow.Key}.call("GET", "/v1/sandboxes/box", "", 200, nil)
	two.errCode("GET", "/v1/api-keys", p.Key, "", 403, "api_key_sandbox_forbidden")
	two.errCode("GET", "/v1/api-keys", boxOnly.Key, "", 403, "api_key_sandbox_forbidden")

	// Rotate on one: the old secret and its link stop on both at once.
	var r e2eKey
	one.call("POST", "/v1/api-keys/"+k.ID+"/rotate", "", 200, &r)
	if r.ID != k.ID || r.Key == k.Key || !r.ExpiresAt.Equal(*k.ExpiresAt) || !slices.Equal(r.Actions, k.Actions) || r.Labels["team"] != "a" {
		t.Fatalf("rotate: got %+v, want %+v's id, scope and expiry with a new secret", r, k)
	}
	for _, c := range []client{one, two} {
		c.errCode("GET", "/v1/sandboxes", k.Key, "", 401, "unauthorized")
		fetch(c, before, 403, "link_revoked")
		c.errCode("GET", "/v1/sandboxes/box", r.Key, "", 200, "")
	}
	rotated := client{t: t, base: two.base, key: r.Key}
	after := link(rotated)
	fetch(one, after, 200, "")

	// Revoke on two: 401 on one at the next request, the link stops, the
	// sandbox stays.
	two.call("DELETE", "/v1/api-keys/"+k.ID, "", 200, nil)
	one.errCode("GET", "/v1/sandboxes", r.Key, "", 401, "unauthorized")
	fetch(one, after, 403, "link_revoked")
	one.call("GET", "/v1/sandboxes/box", "", 200, nil)
	var list struct {
		APIKeys []e2eKey `json:"api_keys"`
	}
	one.call("GET", "/v1/api-keys", "", 200, &list)
	for _, l := range list.APIKeys {
		if l.ID == k.ID || l.Key != "" {
			t.Fatalf("list after revoke: %+v (revoked listed, or a secret shown)", l)
		}
	}

	// An expired key can't be rotated: 409, and it stays expired.
	st, err := pg.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	oldSecret, old := api.NewAPIKey(acct, "old", []string{"*"}, time.Hour, time.Now().Add(-2*time.Hour))
	old.ID = store.NewID("key")
	if _, err := st.CreateAPIKey(context.Background(), old, nil); err != nil {
		t.Fatal(err)
	}
	one.errCode("POST", "/v1/api-keys/"+old.ID+"/rotate", admin, "", 409, "api_key_expired")
	two.errCode("GET", "/v1/sandboxes", oldSecret, "", 401, "api_key_expired")

	// The operator: list, rotate, revoke, each audited.
	table := froogdRun(t, "admin", "api-key", "list", "--database-url", db, "--account", acct)
	if !strings.Contains(table, p.ID) || !strings.Contains(table, "team-admin") || !strings.Contains(table, "label=team=a") || strings.Contains(table, k.ID) {
		t.Fatalf("admin api-key list:\n%s", table)
	}
	newSecret := froogdRun(t, "admin", "api-key", "rotate", "--database-url", db, "--id", narrow.ID)
	one.errCode("GET", "/v1/sandboxes/box", narrow.Key, "", 401, "unauthorized")
	one.errCode("GET", "/v1/sandboxes/box", newSecret, "", 200, "")
	froogdRun(t, "admin", "api-key", "revoke", "--database-url", db, "--id", narrow.ID)
	two.errCode("GET", "/v1/sandboxes/box", newSecret, "", 401, "unauthorized")
	if out, err := exec.Command(froogd, "admin", "api-key", "rotate", "--database-url", db, "--id", old.ID).CombinedOutput(); err == nil || !strings.Contains(string(out), "expired") {
		t.Fatalf("admin rotate of an expired key: %v: %s", err, out)
	}
	if out, err := exec.Command(froogd, "admin", "api-key", "revoke", "--database-url", db).CombinedOutput(); err == nil || !strings.Contains(string(out), "--id") {
		t.Fatalf("admin revoke without --id: %v: %s", err, out)
	}

	var audit struct {
		Events []struct{ Action, Target, Actor string }
	}
	one.call("GET", "/v1/audit?limit=50", "", 200, &audit)
	var got []string
	for _, e := range audit.Events {
		if strings.HasPrefix(e.Action, "api_key.") && (e.Target == k.ID || e.Target == narrow.ID) {
			got = append(got, e.Action+" "+e.Actor)
		}
	}
	by := adminID(t, one)
	want := []string{"api_key.revoke operator", "api_key.rotate operator", "api_key.revoke " + by, "api_key.rotate " + by,
		"api_key.create " + p.ID, "api_key.create " + by}
	if !slices.Equal(got, want) {
		t.Fatalf("audit: got %v, want %v", got, want)
	}
}

// adminID is the id of the key froogd admin made (labelled admin).
func adminID(t *testing.T, c client) string {
	t.Helper()
	var list struct {
		APIKeys []e2eKey `json:"api_keys"`
	}
	c.call("GET", "/v1/api-keys", "", 200, &list)
	for _, l := range list.APIKeys {
		if l.Label == "admin" {
			return l.ID
		}
	}
	t.Fatal("no key labelled admin")
	return ""
}
