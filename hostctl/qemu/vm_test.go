package qemu

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// zombieLeaderEnv makes the test binary a process whose main thread exits
// while its other threads go on: what a QEMU is for a while after it quits
// or is killed, one thread still writing its disk out.
const zombieLeaderEnv = "FROOG_TEST_ZOMBIE_LEADER"

func init() {
	if os.Getenv(zombieLeaderEnv) != "" {
		runtime.LockOSThread() // main runs on the main thread, which exits below
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(zombieLeaderEnv) != "" {
		go func() { select {} }()
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0) // this thread only, not exit_group
	}
	os.Exit(m.Run())
}

// A QEMU whose main thread has exited (Z in /proc) while its other threads
// still run holds its files, the disk's lock among them: alive until its
// last thread is gone, so that a new boot on the disk waits for it; then
// dead, to the driver and to Exited (what the tests' check of a stopped
// sandbox asks), though init has yet to reap it.
func TestAliveUntilTheLastThread(t *testing.T) {
	t.Parallel()
	d := &Driver{o: Options{Dir: t.TempDir()}}
	const id = "sbx_zombie"
	if err := os.MkdirAll(d.dir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), zombieLeaderEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	if err := os.WriteFile(d.file(id, "qemu.pid"), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join("/proc", strconv.Itoa(pid), "status")
	wait.For(t, 10*time.Second, "the main thread exited (Z)", func() bool {
		b, _ := os.ReadFile(status)
		return bytes.Contains(b, []byte("\nState:\tZ"))
	})
	if !d.alive(id) || Exited(pid) {
		t.Fatal("a process whose main thread exited and whose other threads run counts as dead")
	}
	// Killed and not reaped yet (no Wait): a zombie with no thread left,
	// dead.
	cmd.Process.Kill()
	tasks := filepath.Join("/proc", strconv.Itoa(pid), "task")
	wait.For(t, 10*time.Second, "every thread gone", func() bool {
		ts, err := os.ReadDir(tasks)
		return err == nil && len(ts) == 1
	})
	if d.alive(id) || !Exited(pid) {
		t.Fatal("a zombie with no thread left counts as alive")
	}
}

// A guest kernel's panic is summed up by its oops, where it happened and
// its first calls, not by the register dump that ends the console.
func TestPanicSummary(t *testing.T) {
	t.Parallel()
	oops := "[    2.301234] BUG: kernel NULL pointer dereference, address: 0000000000000008\r\n" +
		"[    2.301240] #PF: supervisor read access in kernel mode\r\n" +
		"[    2.301250] Oops: Oops: 0000 [#1] PREEMPT SMP NOPTI\r\n" +
		"[    2.301260] RIP: 0010:blk_mq_complete_request+0x12/0x30\r\n" +
		"[    2.301270] Code: 0f 1f 44 00 00 <48> 8b 47 08\r\n" +
		"[    2.301280] Call Trace:\r\n" +
		"[    2.301281]  <IRQ>\r\n" +
		"[    2.301282]  ? __die+0x23/0x70\r\n" +
		"[    2.301283]  virtblk_done+0x7a/0x110 [virtio_blk]\r\n" +
		"[    2.301284]  vring_interrupt+0x6e/0xa0\r\n" +
		"[    2.301285]  __handle_irq_event_percpu+0x48/0x190\r\n" +
		"[    2.301286]  handle_irq_event+0x38/0x80\r\n" +
		"[    2.301287]  handle_edge_irq+0x8b/0x230\r\n" +
		"[    2.358378] CS:  0010 DS: 0000 ES: 0000 CR0: 0000000080050033\r\n" +
		"[    2.358569] Kernel panic - not syncing: Fatal exception in interrupt\r\n" +
		"[    5.349716] Shutting down cpus with NMI\r\n"
	for _, c := range []struct {
		name, console, want string
	}{
		{"oops", oops, "BUG: kernel NULL pointer dereference, address: 0000000000000008; RIP: 0010:blk_mq_complete_request+0x12/0x30; " +
			"virtblk_done+0x7a/0x110 [virtio_blk]; vring_interrupt+0x6e/0xa0; __handle_irq_event_percpu+0x48/0x190; handle_irq_event+0x38/0x80; " +
			"Kernel panic - not syncing: Fatal exception in interrupt"},
		{"panic without an oops", "[    1.0] VFS: Cannot open root device\n[    1.1] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n",
			"Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"},
		{"no panic", "[    1.0] Run /init as init process\nDebian GNU/Linux 13 box ttyS0\n\nbox login: ", ""},
		{"an oops the guest survived", "[    3.0] BUG: soft lockup - CPU#0 stuck for 22s!\n[    4.0] RIP: 0010:f+0x1/0x2\n", ""},
		{"empty", "", ""},
	} {
		if got := panicSummary([]byte(c.console)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// Whatever a guest writes to its console, the summary is made without a
// fault, and there is one exactly when a line says the kernel panicked.
func FuzzPanicSummary(f *testing.F) {
	f.Add([]byte("[ 1.0] Oops: 0000 [#1]\n[ 1.1] RIP: 0010:f+0x1/0x2\nCall Trace:\n g+0x1/0x2\n[ 1.2] Kernel panic - not syncing: x\n"))
	f.Add([]byte("login: "))
	f.Fuzz(func(t *testing.T, console []byte) {
		s := panicSummary(console)
		panicked := false
		for _, l := range strings.Split(string(console), "\n") {
			l = strings.TrimSpace(kernelTimestamp.ReplaceAllString(strings.TrimRight(l, "\r"), ""))
			panicked = panicked || strings.HasPrefix(l, "Kernel panic - not syncing")
		}
		if (s != "") != panicked {
			t.Fatalf("summary %q for a console that panicked: %v", s, panicked)
		}
	})
}

// A QEMU of the sandbox that its pid file does not name (here there is
// no pid file) ends with the sandbox's stop: a stopped sandbox keeps no
// process. The stand-in is a shell whose command line names the sandbox
// as a QEMU's does (-name froog-ID).
func TestKillEndsAQEMUThePidFileDoesNotName(t *testing.T) {
	t.Parallel()
	d := &Driver{o: Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}}
	const id = "sbx_stray"
	other := exec.Command("sh", "-c", "while :; do sleep 1; done", "-name", "froog-"+id+"x")
	stray := exec.Command("sh", "-c", "while :; do sleep 1; done", "-name", "froog-"+id)
	for _, c := range []*exec.Cmd{other, stray} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	if err := d.kill(id); err != nil {
		t.Fatal(err)
	}
	if !Exited(stray.Process.Pid) {
		t.Fatal("the sandbox's QEMU that its pid file does not name outlived the kill")
	}
	if Exited(other.Process.Pid) {
		t.Fatal("the kill ended another sandbox's QEMU (froog-IDx)")
	}
}
