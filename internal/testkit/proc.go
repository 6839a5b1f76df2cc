package testkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTick is the unit of /proc/PID/stat's utime and stime (USER_HZ, 100
// on every Linux the tests run on).
const ClockTick = 10 * time.Millisecond

// ProcStat is the fields of /proc/PID/stat after the command's name:
// state (0), ppid (1), pgrp (2), session (3), ... utime (11), stime (12),
// ... starttime (19). It is nil when the process is gone.
func ProcStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// CPUTime is the user plus system time every process in pids has used
// (a process that is gone counts nothing).
func CPUTime(pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		f := ProcStat(pid)
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+s) * ClockTick
	}
	return total
}

// Children is the processes whose parent is pid.
func Children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := ProcStat(child); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// RSSKiB is a process's resident set (VmRSS of /proc/PID/status); 0 when
// it is gone.
func RSSKiB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}
