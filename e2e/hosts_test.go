package e2e_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// hostctlArgs are a hostctl's flags on db, advertising addr, with a
// heartbeat of a second and a host silent for 3 s marked down.
func hostctlArgs(t *testing.T, db, ctlKey, name, addr string) []string {
	return []string{"hostctl", "--database-url", db, "--host-name", name, "--data", t.TempDir(), "--control-key-file", ctlKey,
		"--advertise-addr", addr, "--heartbeat-secs", "1", "--host-down-secs", "3", "--capacity", "4"}
}

// froogdOut runs froogd to its end: its output and error.
func froogdOut(args ...string) (string, error) {
	out, err := exec.Command(froogd, args...).CombinedOutput()
	return string(out), err
}

// froogd admin hosts on two host controllers of one Postgres (each
// advertising its own loopback address): the listing, a drain with
// --stop (audited as the admin's), an undrain, and bad input refused
// with nothing changed.
func TestAdminHosts(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	_, h1 := start(t, regexp.MustCompile(`hostctl h1 running(?s:.*)admin on (http://\S+) `), append(hostctlArgs(t, db, ctlKey, "h1", "127.0.0.1"), "--metrics-addr", "127.0.0.1:0")...)
	start(t, regexp.MustCompile(`hostctl h2 running`), hostctlArgs(t, db, ctlKey, "h2", "127.0.0.2")...)
	_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
	c := client{t: t, base: m[1], key: key}
	state := func(name string) string {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
		return sb.State
	}
	at := map[string]string{}
	for _, name := range []string{"a", "b"} {
		c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
		wait.For(t, 15*time.Second, name+" runs", func() bool { return state(name) == "running" })
		var s struct{ Host string }
		c.call("GET", "/v1/sandboxes/"+name+"/ssh", "", 200, &s)
		at[s.Host] = name
	}
	if at["127.0.0.1"] == "" || at["127.0.0.2"] == "" {
		t.Fatalf("two sandboxes on two empty hosts: %v; want one at each host's address", at)
	}
	// The sandbox on h2 answers at 127.0.0.2: the API ran a command there.
	var r struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/"+at["127.0.0.2"]+"/exec", `{"command": "echo on h2"}`, 200, &r)
	if r.Stdout != "on h2\n" {
		t.Fatalf("exec on h2's sandbox: %q", r.Stdout)
	}

	out, err := froogdOut("admin", "hosts", "--database-url", db)
	if err != nil || !regexp.MustCompile(`(?m)^NAME\s+ADDRESS\s+STATE\s+CAPACITY\s+SANDBOXES\s+LAST HEARTBEAT\n`+
		`h1\s+127\.0\.0\.1\s+up\s+4\s+1\s+\S+ \(\d+s ago\)\n`+
		`h2\s+127\.0\.0\.2\s+up\s+4\s+1\s+\S+ \(\d+s ago\)\n$`).MatchString(out) {
		t.Fatalf("admin hosts: %v:\n%s", err, out)
	}

	// The hosts on a hostctl's /metrics.
	res, err := http.Get(h1[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`froog_hosts{draining="false",state="up"} 2`, `froog_hosts{draining="false",state="down"} 0`,
		`froog_host_capacity{host="h2"} 4`, `froog_host_sandboxes{host="h1"} 1`, `froog_host_sandboxes{host="h2"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("hostctl /metrics lacks %s", want)
		}
	}

	// Bad input: refused, saying why, and nothing drained.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "hosts", "drain", "--database-url", db}, "--host is required"},
		{[]string{"admin", "hosts", "drain", "--host", "nope", "--database-url", db}, "not found"},
		{[]string{"admin", "hosts", "undrain", "--host", "h1", "--stop", "--database-url", db}, "flag provided but not defined: -stop"},
		{[]string{"admin", "hosts", "--host-down-secs", "0", "--database-url", db}, "--host-down-secs must be at least 1"},
		{[]string{"admin", "hosts", "list", "--database-url", db}, `unexpected argument "list"`},
	} {
		if out, err := froogdOut(bad.args...); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("froogd %v: %v: %s; want an error saying %q", bad.args, err, out, bad.want)
		}
	}
	if out, _ := froogdOut("admin", "hosts", "--database-url", db); strings.Contains(out, "draining") {
		t.Fatalf("bad input drained a host:\n%s", out)
	}

	// Drain h1 with --stop: its sandbox stops now (the admin's stop in
	// the audit log), h2's runs on; undrain.
	out, err = froogdOut("admin", "hosts", "drain", "--host", "h1", "--stop", "--database-url", db)
	if err != nil || !strings.Contains(out, "host h1 is draining") || !strings.Contains(out, "asked 1 running sandboxes on h1 to stop") {
		t.Fatalf("drain --stop: %v: %s", err, out)
	}
	wait.For(t, 15*time.Second, "h1's sandbox stopped", func() bool { return state(at["127.0.0.1"]) == "stopped" })
	if s := state(at["127.0.0.2"]); s != "running" {
		t.Fatalf("h2's sandbox is %s after h1's drain", s)
	}
	var audit struct {
		Events []struct{ Action, Target, Actor string } `json:"events"`
	}
	c.call("GET", "/v1/audit", "", 200, &audit)
	if e := audit.Events[0]; e.Action != "sandbox.stop" || e.Target != at["127.0.0.1"] || e.Actor != "admin: drain host h1" {
		t.Fatalf("newest audit event: %+v", e)
	}
	if out, _ := froogdOut("admin", "hosts", "--database-url", db); !regexp.MustCompile(`(?m)^h1\s+127\.0\.0\.1\s+up,draining\s`).MatchString(out) {
		t.Fatalf("admin hosts after the drain:\n%s", out)
	}
	if out, err := froogdOut("admin", "hosts", "undrain", "--host", "h1", "--database-url", db); err != nil || !strings.Contains(out, "h1 takes new sandboxes again") {
		t.Fatalf("undrain: %v: %s", err, out)
	}
	if out, _ := froogdOut("admin", "hosts", "--database-url", db); !regexp.MustCompile(`(?m)^h1\s+127\.0\.0\.1\s+up\s`).MatchString(out) {
		t.Fatalf("admin hosts after the undrain:\n%s", out)
	}
}

// hostctl refuses an address other machines cannot use, and a down
// timeout a heartbeat could miss by accident.
func TestHostctlRefusesBadHostFlags(t *testing.T) {
	t.Parallel()
	ctlKey := writeControlKey(t)
	base := []string{"hostctl", "--database-url", "postgres://127.0.0.1:1/x", "--host-name", "h", "--control-key-file", ctlKey, "--data", t.TempDir()}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--advertise-addr", "0.0.0.0"}, `--advertise-addr "0.0.0.0": want one IP address`},
		{[]string{"--advertise-addr", "vm1.internal"}, `--advertise-addr "vm1.internal": want one IP address`},
		{[]string{"--advertise-addr", ""}, `--advertise-addr "": want one IP address`},
		{[]string{"--heartbeat-secs", "5", "--host-down-secs", "9"}, "--host-down-secs at least twice it"},
		{[]string{"--heartbeat-secs", "0"}, "--heartbeat-secs must be at least 1"},
	} {
		if out, err := froogdOut(append(base, bad.args...)...); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("froogd hostctl %v: %v: %s; want an error saying %q", bad.args, err, out, bad.want)
		}
	}
}

// Postgres away for longer than --host-down-secs under two host
// controllers: when it is back, neither marks the other down (each
// waits until its own heartbeats have gone through for that long), and
// their sandboxes run on.
func TestHostsThroughOutage(t *testing.T) {
	t.Parallel()
	pg := privatePostgres(t)
	db, key, ctlKey, secret := selfHostedOn(t, pg.url())
	// The host controllers read their clock from clock: the outage's
	// length is a move of it, not a wait.
	clock := clockFile(t)
	hosts := map[string]*proc{}
	for name, addr := range map[string]string{"h1": "127.0.0.1", "h2": "127.0.0.2"} {
		args := hostctlArgs(t, db, ctlKey, name, addr)
		cmd := exec.Command(froogd, args...)
		cmd.Env = append(os.Environ(), "FROOG_TEST_CLOCK_FILE="+clock)
		hosts[name], _ = startCmd(t, regexp.MustCompile(`hostctl `+name+` running`), cmd, args)
	}
	_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
	c := client{t: t, base: m[1], key: key}
	state := func(name string) (string, string) {
		var sb struct{ State, Error string }
		c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
		return sb.State, sb.Error
	}
	for _, name := range []string{"a", "b"} {
		c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
		wait.For(t, 15*time.Second, name+" runs", func() bool { s, _ := state(name); return s == "running" })
	}

	pg.stop()
	for name, p := range hosts {
		wait.For(t, 15*time.Second, name+"'s heartbeat fails", func() bool { return strings.Contains(p.stderr.String(), "heartbeat failed") })
	}
	// 5 s on the hosts' clock: longer than --host-down-secs, every host
	// is silent.
	if err := os.WriteFile(clock, []byte("5s"), 0o600); err != nil {
		t.Fatal(err)
	}
	pg.start()
	wait.For(t, 30*time.Second, "the API reads the store again", func() bool {
		res, err := exec.Command(froogd, "admin", "hosts", "--database-url", db).CombinedOutput()
		return err == nil && strings.Count(string(res), " up ") == 2
	})
	// Several heartbeats past --host-down-secs since (each controller
	// judges others once its own beats have gone through for that long):
	// no host is judged.
	markedDown := func() bool {
		for _, p := range hosts {
			if strings.Contains(p.stderr.String(), "host marked down") {
				return true
			}
		}
		return false
	}
	if wait.Until(5*time.Second, markedDown) {
		for name, p := range hosts {
			t.Errorf("%s's log after the outage: %s", name, p.stderr.String())
		}
	}
	for _, name := range []string{"a", "b"} {
		if s, e := state(name); s != "running" {
			t.Errorf("%s is %s (%s) after the outage", name, s, e)
		}
	}
}
