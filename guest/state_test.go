package guest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"froog.tech/froog/internal/loopback"
)

func TestParseKind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Kind
		ok   bool
	}{
		{"desktop", KindDesktop, true},
		{"browser", KindBrowser, true},
		{"", "", false},
		{"Desktop", "", false},
		{"wall", "", false},
	} {
		got, err := ParseKind(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseKind(%q) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestStateDir(t *testing.T) {
	for _, tc := range []struct{ home, xdg, want string }{
		{"/home/user", "", "/home/user/.local/state/froog-desktop"},
		{"/home/user", "/x/state", "/x/state/froog-desktop"},
		{"/home/user", "relative", "/home/user/.local/state/froog-desktop"},
	} {
		if got := StateDir(tc.home, tc.xdg); got != tc.want {
			t.Errorf("StateDir(%q, %q) = %q, want %q", tc.home, tc.xdg, got, tc.want)
		}
	}
}

func TestValidProfile(t *testing.T) {
	for _, tc := range []struct {
		dir string
		ok  bool
	}{
		{"/home/user/.config/froog-browser", true},
		{"/data/chrome-work", true},
		{"/tmp/p", true},
		{"/", false},
		{"relative/dir", false},
		{"/home/user/../../etc", false},
		{"/etc", false},
		{"/etc/chromium", false},
		{"/usr/local/p", false},
		{"/proc/self", false},
		{"/sys", false},
		{"/dev/shm/p", false},
		{"/boot", false},
		{"/bin", false},
		{"/sbin/x", false},
		{"/lib64/x", false},
		{"/var/lib/p", false},
		{"/var/libx", true},
		{"/etcetera", true},
	} {
		if err := ValidProfile(tc.dir); (err == nil) != tc.ok {
			t.Errorf("ValidProfile(%q) = %v, want ok=%v", tc.dir, err, tc.ok)
		}
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // in the error; "" for none
	}{
		{"desktop", Options{Kind: KindDesktop, Home: "/h", StateDir: "/s"}, ""},
		{"browser, default profile", Options{Kind: KindBrowser, Home: "/h", StateDir: "/s"}, ""},
		{"no kind", Options{Home: "/h", StateDir: "/s"}, "unknown kind"},
		{"relative home", Options{Kind: KindDesktop, Home: "h", StateDir: "/s"}, "absolute"},
		{"profile on the desktop", Options{Kind: KindDesktop, Home: "/h", StateDir: "/s", Profile: "/p"}, "browser view"},
		{"system profile", Options{Kind: KindBrowser, Home: "/h", StateDir: "/s", Profile: "/etc/x"}, "system folder"},
		{"a browser window on the desktop", Options{Kind: KindDesktop, Home: "/h", StateDir: "/s", Browser: true}, ""},
		{"a browser window on the browser view", Options{Kind: KindBrowser, Home: "/h", StateDir: "/s", Browser: true}, "--browser is for the desktop"},
		{"every problem at once", Options{Kind: "x", Home: "h"}, "state folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.check()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	o := Options{Kind: KindBrowser, Home: "/h", StateDir: "/s"}
	o.check()
	if o.Profile != "/h/.config/froog-browser" {
		t.Errorf("default profile %q, want /h/.config/froog-browser", o.Profile)
	}
}

func TestRecords(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := readRecord(dir, KindDesktop); ok || err != nil {
		t.Fatalf("no file: got ok=%v, %v; want nothing", ok, err)
	}
	me := record{State: State{Kind: KindDesktop, Running: true, Display: ":12", VNCPort: 5912, PID: os.Getpid()}, PIDStart: startTime(os.Getpid())}
	if err := writeRecord(dir, me); err != nil {
		t.Fatal(err)
	}
	got, ok, err := readRecord(dir, KindDesktop)
	if !ok || err != nil || got != me {
		t.Fatalf("got %+v, %v, %v; want %+v", got, ok, err, me)
	}
	if !got.alive() {
		t.Errorf("this process's record is not alive")
	}
	var asked []int
	KillGroups(dir, func(pgid int) bool { asked = append(asked, pgid); return false })
	if len(asked) != 1 || asked[0] != os.Getpid() {
		t.Errorf("KillGroups asked about %v, want [%d]", asked, os.Getpid())
	}
	// Another process with the pid (another start time) is not it.
	other := me
	other.PIDStart++
	if other.alive() {
		t.Errorf("a record with another start time is alive")
	}
	if (record{State: State{PID: 1 << 30}, PIDStart: 1}).alive() {
		t.Errorf("a record of no process is alive")
	}
	// Only the record of the given pid is removed.
	removeRecord(dir, KindDesktop, os.Getpid()+1)
	if _, ok, _ := readRecord(dir, KindDesktop); !ok {
		t.Fatalf("removeRecord removed another pid's record")
	}
	removeRecord(dir, KindDesktop, os.Getpid())
	if _, ok, _ := readRecord(dir, KindDesktop); ok {
		t.Fatalf("removeRecord left the record")
	}
	// Garbage and a record of the wrong kind read as nothing.
	for _, junk := range []string{"{", `{"kind":"browser","pid":5}`, `{"kind":"desktop","pid":0}`} {
		os.WriteFile(statePath(dir, KindDesktop), []byte(junk), 0o600)
		if _, ok, err := readRecord(dir, KindDesktop); ok || err != nil {
			t.Errorf("%s: got ok=%v, %v; want nothing", junk, ok, err)
		}
	}
}

func TestDisplayFree(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	free := loopback.FreePort(t)
	lock := func(n int, content string) {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf(".X%d-lock", n)), []byte(content), 0o644)
	}
	lock(1, fmt.Sprintf("%10d\n", os.Getpid())) // a live server
	lock(2, fmt.Sprintf("%10d\n", 1<<30))       // a dead one's
	lock(3, "garbage")
	for _, tc := range []struct {
		name    string
		n, port int
		want    bool
	}{
		{"nothing there", 0, free, true},
		{"port taken", 0, busy, false},
		{"live lock", 1, free, false},
		{"stale lock", 2, free, true},
		{"unreadable lock", 3, free, false},
	} {
		if got := displayFree(dir, tc.n, tc.port); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestProbeRFB(t *testing.T) {
	serve := func(greeting string) int {
		return loopback.Serve(t, func(c net.Conn) { c.Write([]byte(greeting)); c.Close() })
	}
	for _, tc := range []struct {
		name string
		port int
		ok   bool
	}{
		{"RFB 3.8", serve("RFB 003.008\n"), true},
		{"RFB 3.3", serve("RFB 003.003\n"), true},
		{"HTTP", serve("HTTP/1.1 400 Bad Request\r\n\r\n"), false},
		{"SSH", serve("SSH-2.0-OpenSSH_9.2\r\n"), false},
		{"short", serve("RFB 003"), false},
		{"nothing listens", loopback.FreePort(t), false},
		{"no port", 0, false},
	} {
		if err := probeRFB(tc.port); (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
