package qemu

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/testkit"
)

// standIn makes what endpoint reads of a VM: a live process whose command
// line names it (a sleep, not QEMU), its pid file, its SSH port (a
// listener that drops connections until greet is closed, then an SSH
// server with its host key) and its console.
func standIn(t *testing.T, d *Driver, id string, greet <-chan struct{}) (console *os.File) {
	t.Helper()
	if err := os.MkdirAll(d.dir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	// In a group of its own, ended whole: the sleep is the shell's child,
	// and outlived it by ten minutes.
	vm := exec.Command("sh", "-c", "sleep 600", "froog-"+id)
	vm.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := vm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-vm.Process.Pid, syscall.SIGKILL); vm.Wait() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// Once greet is closed, an SSH server with the VM's host key (the
	// probe checks the key it proves); before, a port that drops.
	priv, _, err := d.hostKey(id)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey([]byte(priv))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PasswordCallback: func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) {
		return nil, errors.New("no")
	}}
	cfg.AddHostKey(signer)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case <-greet:
				go func() {
					defer c.Close()
					if sc, _, _, err := ssh.NewServerConn(c, cfg); err == nil {
						sc.Close()
					}
				}()
			default:
				c.Close()
			}
		}
	}()
	files := map[string]string{
		"qemu.pid": strconv.Itoa(vm.Process.Pid),
		"ssh_port": strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
	}
	for name, v := range files {
		if err := os.WriteFile(d.file(id, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	console, err = os.Create(d.file(id, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { console.Close() })
	return console
}

// A guest that is still booting is waited for past the stall budget as
// long as its console goes on; one whose console stops fails after it,
// saying which stage it stalled in. (The OS image's suite failed on a
// loaded machine: a guest past "login:" whose sshd was slow, given one
// fixed 3 minutes.)
func TestEndpointFollowsBootProgress(t *testing.T) {
	t.Parallel()
	// The guest writes a line every stall/pace. On a loaded machine a
	// goroutine's sleep can overrun by hundreds of milliseconds, and a
	// line late by the rest of the budget reads as a stall: the pace
	// leaves it seven intervals of slack.
	const stall, pace = 2 * time.Second, 8
	lines := []string{
		"[    0.000000] Linux version 6.12.117+deb13-amd64",
		"[    7.677544] Run /init as init process",
		"[   30.1] systemd[1]: systemd 257 running in system mode",
		"[   40.2] cloud-init[301]: Cloud-init v. 25.1.4 running 'init-local'",
		"[   50.3] cloud-init[320]: Cloud-init v. 25.1.4 running 'init'",
		"[  OK  ] Started ssh.service - OpenBSD Secure Shell server.",
		"box login: ",
	}
	tests := []struct {
		name    string
		lines   int  // console lines written, one every stall/pace
		greet   bool // sshd answers after the last line
		wantErr []string
	}{
		{name: "slow but going on", lines: len(lines), greet: true},
		{name: "stalled in the initramfs", lines: 2, wantErr: []string{"no progress", "initramfs", "Run /init"}},
		{name: "login prompt, no sshd", lines: len(lines), wantErr: []string{"no progress", "login prompt", "box login:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			signer := testkit.NewKey(t)
			d, err := New(Options{Dir: t.TempDir(), Kernel: "vmlinux", Initrd: "initrd", ControlKey: signer, BootTimeout: stall})
			if err != nil {
				t.Fatal(err)
			}
			const id = "sbx_boot"
			greet := make(chan struct{})
			console := standIn(t, d, id, greet)
			go func() {
				for _, l := range lines[:tt.lines] {
					console.WriteString(l + "\n")
					time.Sleep(stall / pace) // the guest's pace, not a wait for the test
				}
				if tt.greet {
					close(greet)
				}
			}()
			start := time.Now()
			_, err = d.endpoint(context.Background(), id)
			took := time.Since(start)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("after %v: %v; want the endpoint of a guest whose console went on for %v", took, err, time.Duration(tt.lines)*stall/pace)
				}
				return
			}
			if err == nil {
				t.Fatalf("a stalled boot answered")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to say %q", err, w)
				}
			}
		})
	}
}

func TestBootStage(t *testing.T) {
	t.Parallel()
	tests := []struct{ console, want string }{
		{"", "nothing on the console yet"},
		{"Linux version 6.1\nfoo\n", "the kernel"},
		{"Linux version 6.1\nRun /init as init process\n", "the initramfs"},
		{"Run /init\nsystemd[1]: hi\nCloud-init v. 25 running 'modules:final' at x\n", "cloud-init (modules:final)"},
		{"Cloud-init v. 25 finished at Tue\n", "cloud-init (finished)"},
		{"Cloud-init v. 25 running 'init'\nbox login: ", "the login prompt"},
		{"tinyvm: ready\n", "tinyvm's init (ready"},
		{"Welcome to Debian\nfroog-init: box (instance sbx_1) from its seed\n", "froog-init (the seed given"},
		{"froog-init: seed: no seed\n[FAILED] Failed to start froog-init.service - froog: this sandbox's name.\n", "froog-init failed"},
		{"froog-init: box (instance sbx_1) from its seed\nStarted ssh.service", "sshd started"},
	}
	for _, tt := range tests {
		if got := bootStage([]byte(tt.console)); !strings.Contains(got, tt.want) {
			t.Errorf("bootStage(%q) = %q; want it to say %q", tt.console, got, tt.want)
		}
	}
}

// Before the guest's init runs, a minute of standing still is a hang
// (stallError.early, and the boot may be tried again); after it, the
// budget is BootTimeout's.
func TestStallBudgetByStage(t *testing.T) {
	t.Parallel()
	const stall = 3 * time.Minute
	tests := []struct {
		console   string
		idle      time.Duration
		wantEarly bool
		wantErr   bool
	}{
		{"", 61 * time.Second, true, true},
		{"Linux version 6.12\n", 59 * time.Second, true, false},
		{"Linux version 6.12\nRun /init as init process\n", 61 * time.Second, true, true},
		{"Run /init\ntinyvm: home on /dev/vda\n", 61 * time.Second, false, false},
		{"Run /init\ntinyvm: home on /dev/vda\n", stall + time.Second, false, true},
		{"Run /init\nsystemd[1]: hi\n", 2 * time.Minute, false, false},
		{"box login: ", stall + time.Second, false, true},
	}
	for _, tt := range tests {
		t0 := time.Unix(1000, 0)
		w := newBootWatch(stall, t0)
		w.observe(t0, []byte(tt.console), 100) // QEMU idle from here on
		err := w.observe(t0.Add(tt.idle), []byte(tt.console), 100)
		if (err != nil) != tt.wantErr {
			t.Errorf("%q idle %v: %v; want an error: %v", tt.console, tt.idle, err, tt.wantErr)
			continue
		}
		var se *stallError
		if err != nil && (!errors.As(err, &se) || se.early != tt.wantEarly) {
			t.Errorf("%q idle %v: %#v; want a stallError, early %v", tt.console, tt.idle, err, tt.wantEarly)
		}
	}
}
