package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/froog"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"90", 90 * time.Second, false},
		{"15m", 15 * time.Minute, false},
		{"4h", 4 * time.Hour, false},
		{"7d", 7 * 24 * time.Hour, false},
		{"0", 0, false},
		{"soon", 0, true},
		{"d", 0, true},
	} {
		got, err := parseDuration(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestRemote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, name, path string
		ok             bool
	}{
		{"my-box:demo.mp4", "my-box", "demo.mp4", true},
		{"my-box:", "my-box", "", true},
		{"./a:b", "", "", false},
		{"/tmp/x", "", "", false},
		{":x", "", "", false},
	} {
		name, p, ok := remote(tc.in)
		if name != tc.name || p != tc.path || ok != tc.ok {
			t.Errorf("remote(%q) = %q %q %v; want %q %q %v", tc.in, name, p, ok, tc.name, tc.path, tc.ok)
		}
	}
}

// A sandbox's new address or key replaces its line; other lines stay.
func TestRecordHostKey(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no t.Parallel: Setenv
	for _, line := range []string{"[127.0.0.1]:2201 ssh-ed25519 AAAA1", "[127.0.0.1]:2202 ssh-ed25519 BBBB", "[127.0.0.1]:2201 ssh-ed25519 AAAA2"} {
		if _, err := recordHostKey(line); err != nil {
			t.Fatal(err)
		}
	}
	path, _ := recordHostKey("[127.0.0.1]:2202 ssh-ed25519 BBBB")
	b, _ := os.ReadFile(path)
	if got, want := string(b), "[127.0.0.1]:2201 ssh-ed25519 AAAA2\n[127.0.0.1]:2202 ssh-ed25519 BBBB\n"; got != want {
		t.Fatalf("known_hosts %q, want %q", got, want)
	}
	if filepath.Base(path) != "known_hosts" || !strings.Contains(path, "froog") {
		t.Fatalf("path %s", path)
	}
	if _, err := recordHostKey(""); err == nil {
		t.Fatal("an empty line was recorded")
	}
}

// A listing shows a URL's address as the API gives it (the edge's port
// included), never its token.
func TestAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		u    froog.URL
		want string
	}{
		{froog.URL{Host: "web-3000-k7f2qx.froog.localhost", Url: "https://web-3000-k7f2qx.froog.localhost:8443/?_token=pt_x"}, "https://web-3000-k7f2qx.froog.localhost:8443/"},
		{froog.URL{Host: "web-3000-k7f2qx.froog.test", Url: "https://web-3000-k7f2qx.froog.test/"}, "https://web-3000-k7f2qx.froog.test/"},
		{froog.URL{Host: "web-3000-k7f2qx.froog.test"}, "https://web-3000-k7f2qx.froog.test/"},
	} {
		if got := address(&tc.u); got != tc.want {
			t.Errorf("address(%+v) = %q, want %q", tc.u, got, tc.want)
		}
	}
}

func TestAutoStop(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 14, 3, 0, 0, time.Local)
	at := now.Add(3*time.Hour + 59*time.Minute + 30*time.Second)
	soon := now.Add(20 * time.Minute)
	for _, tc := range []struct {
		sb   froog.Sandbox
		want string
	}{
		{froog.Sandbox{TtlSecs: 4 * 3600, AutoStopAt: &at}, "at 18:02 (in 3h 59m; 4h after each start)"},
		{froog.Sandbox{TtlSecs: 900, AutoStopAt: &soon}, "at 14:23 (in 20m; 15m after each start)"},
		{froog.Sandbox{TtlSecs: 3600}, "1h after each start"},
		{froog.Sandbox{}, "none"},
	} {
		if got := autoStop(&tc.sb, now); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// -e KEY takes this shell's value; KEY=VALUE its own; an unset KEY is an
// error that names it.
func TestEnvValues(t *testing.T) {
	t.Setenv("FROOG_TEST_SHELL", "from the shell") // no t.Parallel: Setenv
	got, err := envValues([]string{"A=1", "FROOG_TEST_SHELL", "B=x=y"})
	if err != nil || len(got) != 3 || got["A"] != "1" || got["FROOG_TEST_SHELL"] != "from the shell" || got["B"] != "x=y" {
		t.Fatalf("envValues: %v %v", got, err)
	}
	if _, err := envValues([]string{"FROOG_TEST_UNSET_VAR", "=v"}); err == nil || !strings.Contains(err.Error(), "FROOG_TEST_UNSET_VAR") || !strings.Contains(err.Error(), `"=v"`) {
		t.Fatalf("envValues of an unset KEY and an empty key: %v, want both named", err)
	}
}
