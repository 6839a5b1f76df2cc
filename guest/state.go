package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kind is which screen: the desktop, or the browser view.
type Kind string

const (
	KindDesktop Kind = "desktop"
	KindBrowser Kind = "browser"
)

// ParseKind accepts "desktop" and "browser".
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindDesktop, KindBrowser:
		return k, nil
	}
	return "", fmt.Errorf("unknown kind %q (desktop, browser)", s)
}

// State is what start and status print, one JSON object on a line:
//
//	{"kind":"desktop","running":true,"display":":10","vnc_port":5910,"pid":4242,"transport":"vnc"}
//	{"kind":"desktop","running":true,…,"transport":"selkies","selkies_port":6110}
//	{"kind":"desktop","running":true,…,"audio_port":6210,"pulse_server":"unix:/tmp/.froog-desktop-pulse-10/native"}
//	{"kind":"desktop","running":false}
type State struct {
	Kind    Kind   `json:"kind"`
	Running bool   `json:"running"`
	Display string `json:"display,omitempty"`
	// VNCPort listens on 127.0.0.1 and speaks RFB.
	VNCPort int `json:"vnc_port,omitempty"`
	// Profile is the browser view's Chromium user data directory.
	Profile string `json:"profile,omitempty"`
	// PID is the supervisor's, which leads the process group of
	// everything it started.
	PID int `json:"pid,omitempty"`
	// Transport is what the screen offers besides VNC: "selkies" when
	// Selkies runs on it and answers on SelkiesPort (127.0.0.1), else
	// "vnc". Only for a running screen.
	Transport   string `json:"transport,omitempty"`
	SelkiesPort int    `json:"selkies_port,omitempty"`
	// AudioPort is the screen's sound server on 127.0.0.1 (sound.go),
	// and PulseServer the PULSE_SERVER to play on the screen; both
	// absent where the screen has no sound.
	AudioPort   int    `json:"audio_port,omitempty"`
	PulseServer string `json:"pulse_server,omitempty"`
}

// record is the state file: the State plus what tells the supervisor
// from a later process that got its pid.
type record struct {
	State
	PIDStart uint64 `json:"pid_start"`
}

// StateDir is where froog-desktop keeps its state for the user whose home
// is home: $XDG_STATE_HOME/froog-desktop, or ~/.local/state/froog-desktop.
func StateDir(home, xdgStateHome string) string {
	if xdgStateHome != "" && filepath.IsAbs(xdgStateHome) {
		return filepath.Join(xdgStateHome, "froog-desktop")
	}
	return filepath.Join(home, ".local", "state", "froog-desktop")
}

func statePath(dir string, k Kind) string { return filepath.Join(dir, string(k)+".json") }

// readRecord reads a kind's state file; a missing one is no error.
func readRecord(dir string, k Kind) (record, bool, error) {
	b, err := os.ReadFile(statePath(dir, k))
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, fmt.Errorf("read desktop state: %w", err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.Kind != k || r.PID <= 0 {
		return record{}, false, nil // garbage: as if nothing ran
	}
	return r, true, nil
}

// writeRecord replaces the state file atomically.
func writeRecord(dir string, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := statePath(dir, r.Kind) + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write desktop state: %w", err)
	}
	if err := os.Rename(tmp, statePath(dir, r.Kind)); err != nil {
		return fmt.Errorf("write desktop state: %w", err)
	}
	return nil
}

// removeRecord removes the kind's state file if it still names pid.
func removeRecord(dir string, k Kind, pid int) {
	if r, ok, _ := readRecord(dir, k); ok && r.PID == pid {
		os.Remove(statePath(dir, k))
	}
}

// KillGroups kills the process groups of the supervisors recorded under
// dir, live or not, whose leader ours accepts, and waits (up to 5 s) until
// no live process is left in them: what a host that stops the sandbox
// does (hostctl/local), so that nothing of a desktop outlives it.
func KillGroups(dir string, ours func(pgid int) bool) {
	var killed []int
	for _, k := range []Kind{KindDesktop, KindBrowser} {
		if r, ok, _ := readRecord(dir, k); ok && ours(r.PID) {
			syscall.Kill(-r.PID, syscall.SIGKILL)
			killed = append(killed, r.PID)
		}
	}
	for _, g := range killed {
		waitUntil(5*time.Second, func() bool { return groupGone(g) })
	}
}

// startTime is the process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat), 0 if it does not exist.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold anything.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): field 22 is f[19].
	if len(f) < 20 || f[0] == "Z" {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// alive says whether the recorded supervisor still runs.
func (r record) alive() bool {
	return r.PID > 0 && r.PIDStart != 0 && startTime(r.PID) == r.PIDStart
}

// groupGone says whether no live process is left in process group pgid.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) || len(GroupPids(pgid)) == 0
}

// GroupPids lists the live processes of process group pgid (zombies
// don't count: whoever reaps them is not always there).
func GroupPids(pgid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state, ppid, pgrp, ...
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
