package qemu

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A boot is given time while it progresses, not one fixed budget: under
// TCG on a busy machine a guest may take many minutes to reach SSH and
// still be fine, and a guest that hangs should fail as soon as that is
// clear. Progress is the console advancing, or QEMU being busy (a TCG
// guest that boots burns CPU; one that hangs, or whose sshd is not coming,
// idles). A boot fails after BootTimeout without either (earlyStall
// before the guest's own init), or after bootLimit × BootTimeout in all,
// and says which stage it stalled in.
const (
	bootLimit = 5
	// earlyStall bounds a stall before the guest's init runs: the firmware,
	// the kernel and the initramfs never leave QEMU idle for long, and a
	// guest that does is hung (stallError.early).
	earlyStall = time.Minute
	// busyShare of one CPU, over a second or more, counts as progress.
	busyShare = 0.2
	// clkTck is the unit of /proc/PID/stat's CPU times (USER_HZ).
	clkTck = 100
)

// bootWatch follows one boot's progress.
type bootWatch struct {
	stall, limit      time.Duration
	start, progressed time.Time
	size              int
	stage             string
	cpu               uint64 // QEMU's CPU time at cpuAt, in clock ticks
	cpuAt             time.Time
}

func newBootWatch(stall time.Duration, now time.Time) *bootWatch {
	return &bootWatch{stall: stall, limit: bootLimit * stall, start: now, progressed: now, stage: bootStage(nil)}
}

// observe takes a sample: the console so far and QEMU's CPU time. It
// returns why the boot is given up, or nil while it may go on.
func (w *bootWatch) observe(now time.Time, console []byte, cpu uint64) error {
	if len(console) != w.size {
		w.size, w.stage, w.progressed = len(console), bootStage(console), now
	}
	switch {
	case w.cpuAt.IsZero() || cpu < w.cpu:
		w.cpu, w.cpuAt = cpu, now
	case now.Sub(w.cpuAt) >= time.Second:
		if float64(cpu-w.cpu)/clkTck >= busyShare*now.Sub(w.cpuAt).Seconds() {
			w.progressed = now
		}
		w.cpu, w.cpuAt = cpu, now
	}
	if now.Sub(w.start) > w.limit {
		return fmt.Errorf("still booting after %v, the limit (at %s)", w.limit, w.stage)
	}
	stall, early := w.stall, earlyStage(w.stage)
	if early {
		stall = min(stall, earlyStall)
	}
	if now.Sub(w.progressed) > stall {
		return &stallError{stall: stall, after: now.Sub(w.start).Round(time.Second), stage: w.stage, early: early}
	}
	return nil
}

// stallError is a boot that stopped: console still and QEMU idle.
type stallError struct {
	stall, after time.Duration
	stage        string
	// early: before the guest's init ran, so nothing of the sandbox has
	// run either and the guest may be booted again.
	early bool
}

func (e *stallError) Error() string {
	return fmt.Sprintf("no progress for %v (console still, QEMU idle), %v after the boot began: stalled at %s", e.stall, e.after, e.stage)
}

// sshdUp says whether the console shows the guest's sshd started: from
// then on a probe waits longer for its greeting (a loaded TCG guest may
// take seconds to start the session process that sends it).
func (w *bootWatch) sshdUp() bool {
	return strings.HasPrefix(w.stage, "sshd") || strings.HasPrefix(w.stage, "the login prompt") || strings.HasPrefix(w.stage, "tinyvm's init (ready")
}

// probeWait is how long one probe of the guest's SSH port waits for the
// greeting.
func (w *bootWatch) probeWait() time.Duration {
	if w.sshdUp() {
		return 10 * time.Second
	}
	return time.Second
}

// stages are what a boot's console shows, the latest in the console
// naming where the boot is.
var stages = []struct {
	marker string
	stage  string
}{
	{"Linux version", stageKernel},
	{"Run /init", stageInitramfs},
	{"systemd[1]", "systemd's start-up"},
	{"Welcome to", "systemd's start-up"},
	{"froog-init: ", "froog-init (the seed given; the network and sshd next)"},
	{"Failed to start froog-init", "froog-init failed (its line above says why)"},
	{"Started ssh", "sshd started, not answering"},
	{"login:", "the login prompt (userspace is up; sshd not answering)"},
	{"tinyvm: ", "tinyvm's init"},
	{"tinyvm: ready", "tinyvm's init (ready; sshd not answering)"},
}

var cloudInit = regexp.MustCompile(`Cloud-init v\. \S+ (?:running '([^']+)'|(finished) at)`)

// The stages before the guest's own init (tinyvm's init is its
// initramfs, and says "tinyvm: " once it has done anything of the
// sandbox's).
const (
	stageNothing   = "nothing on the console yet (firmware, or the kernel loading)"
	stageKernel    = "the kernel"
	stageInitramfs = "the initramfs"
)

func earlyStage(stage string) bool {
	return stage == stageNothing || stage == stageKernel || stage == stageInitramfs
}

// bootStage names where the boot is, from its console.
func bootStage(console []byte) string {
	stage, at := stageNothing, -1
	for _, s := range stages {
		if i := bytes.LastIndex(console, []byte(s.marker)); i >= 0 && i >= at {
			stage, at = s.stage, i
		}
	}
	for _, m := range cloudInit.FindAllSubmatchIndex(console, -1) {
		if m[0] > at {
			name := "finished"
			if m[2] >= 0 {
				name = string(console[m[2]:m[3]])
			}
			stage, at = "cloud-init ("+name+")", m[0]
		}
	}
	return stage
}

// cpuTicks is process pid's CPU time (user and system) in clock ticks;
// 0 if it is gone.
func cpuTicks(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3; utime and stime are 14 and 15
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s
}
