package qemu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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
// last thread is gone, so that a new boot on the disk waits for it.
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
	if !d.alive(id) {
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
	if d.alive(id) {
		t.Fatal("a zombie with no thread left counts as alive")
	}
}
