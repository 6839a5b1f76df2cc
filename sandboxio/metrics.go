package sandboxio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Runner runs a shell command in a sandbox: *Shell, or the API's
// interface over it.
type Runner interface {
	Run(ctx context.Context, sandboxID, command string, stdin []byte, stdout, stderr io.Writer, timeout time.Duration) (Result, error)
}

var _ Runner = (*Shell)(nil)

// Metrics are a running sandbox's numbers, read now (the docs' Metrics
// section). CPUPercent is of all its CPUs over half a second; network
// bytes are since boot, loopback left out; IOPressure is the share of
// the last minute some task waited on disk (PSI's "some avg60"), nil
// when the kernel has no PSI.
type Metrics struct {
	SampledAt        time.Time `json:"sampled_at"`
	CPUCount         int       `json:"cpu_count"`
	CPUPercent       float64   `json:"cpu_percent"`
	MemoryUsedBytes  int64     `json:"memory_used_bytes"`
	MemoryTotalBytes int64     `json:"memory_total_bytes"`
	DiskUsedBytes    int64     `json:"disk_used_bytes"`
	DiskTotalBytes   int64     `json:"disk_total_bytes"`
	NetworkRxBytes   int64     `json:"network_rx_bytes"`
	NetworkTxBytes   int64     `json:"network_tx_bytes"`
	IOPressure       *float64  `json:"io_pressure"`
}

// Process is one process of a running sandbox. CPUPercent is of all the
// sandbox's CPUs over half a second, as Metrics' is.
type Process struct {
	PID         int     `json:"pid"`
	PPID        int     `json:"ppid"`
	State       string  `json:"state"`
	CPUPercent  float64 `json:"cpu_percent"`
	MemoryBytes int64   `json:"memory_bytes"`
	Name        string  `json:"name"`
	Command     string  `json:"command"`
}

// MaxProcesses caps the processes ReadProcesses returns (the busiest).
const MaxProcesses = 100

// maxCommandLine caps one process's command line.
const maxCommandLine = 1024

// sampleTimeout bounds a sampling command: half a second of sleep and
// a few reads of /proc.
const sampleTimeout = 15 * time.Second

// maxSample caps a sampling command's output.
const maxSample = 4 << 20

// metricsScript prints the sections ParseMetrics reads, each after a
// "== name" line: /proc/stat's cpu lines twice, half a second apart,
// then /proc/meminfo, the root file system (stat -f: block size, blocks,
// free blocks), /proc/net/dev and /proc/pressure/io when there is one.
const metricsScript = `export LC_ALL=C
echo '== stat'; grep '^cpu' /proc/stat
sleep 0.5
echo '== stat'; grep '^cpu' /proc/stat
echo '== meminfo'; cat /proc/meminfo
echo '== fs'; stat -f -c '%S %b %f' /
echo '== net'; cat /proc/net/dev
echo '== io'; cat /proc/pressure/io 2>/dev/null
exit 0`

// processScript prints the page size, then /proc/stat's first line and
// every process's stat line twice, half a second apart (the shell's own
// read: no process started per process), then every process's command
// line, its first 1 KiB, NULs made spaces, after head's "==> PID/cmdline
// <==" line: one head for all of them. (A head and a tr per process took
// over the sample's 15 s where /proc holds the whole host's processes,
// the local driver's, on a loaded machine.)
const processScript = `export LC_ALL=C
cd /proc || exit 1
echo '== page'; getconf PAGESIZE 2>/dev/null || echo 4096
for n in 1 2; do
  echo '== stat'; head -n 1 stat
  for p in [0-9]*; do read -r l 2>/dev/null < "$p/stat" && printf '%s\n' "$l"; done
  [ "$n" = 1 ] && sleep 0.5
done
echo '== cmd'
head -v -c 1024 -- [0-9]*/cmdline 2>/dev/null | tr '\000' ' '
echo
exit 0`

// ReadMetrics reads sandboxID's metrics with one command over r.
func ReadMetrics(ctx context.Context, r Runner, sandboxID string) (Metrics, error) {
	out, err := sample(ctx, r, sandboxID, metricsScript)
	if err != nil {
		return Metrics{}, err
	}
	m, err := ParseMetrics(out)
	m.SampledAt = time.Now().UTC()
	return m, err
}

// ReadProcesses reads sandboxID's processes with one command over r,
// the busiest first, at most MaxProcesses.
func ReadProcesses(ctx context.Context, r Runner, sandboxID string) ([]Process, error) {
	out, err := sample(ctx, r, sandboxID, processScript)
	if err != nil {
		return nil, err
	}
	return ParseProcesses(out)
}

// StoppedProcesses is how many processes a stopped sandbox's last sample
// keeps (docs: froog ps).
const StoppedProcesses = 12

// LastSample reads sandboxID's busiest StoppedProcesses processes over
// r, as the JSON a stopped sandbox's last sample keeps
// (store.ProcessSample).
func LastSample(ctx context.Context, r Runner, sandboxID string) (json.RawMessage, error) {
	ps, err := ReadProcesses(ctx, r, sandboxID)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ps[:min(len(ps), StoppedProcesses)])
}

func sample(ctx context.Context, r Runner, sandboxID, script string) ([]byte, error) {
	stdout, stderr := &Capped{Max: maxSample}, &Capped{Max: 4 << 10}
	res, err := r.Run(ctx, sandboxID, script, nil, stdout, stderr, sampleTimeout)
	if err != nil {
		return nil, err
	}
	if res.Code != 0 {
		return nil, fmt.Errorf("%w: sampling exited %d: %s", ErrBadSample, res.Code, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// ErrBadSample: a sampling command's output is not what its script
// prints (the sandbox's /proc is not Linux's, or was tampered with).
var ErrBadSample = errors.New("sandboxio: unreadable sample")

func badSample(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSample, fmt.Sprintf(format, args...))
}

// sections splits a script's output into its "== name" sections, in
// order.
type section struct {
	name  string
	lines []string
}

func sections(out []byte) ([]section, error) {
	var all []section
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "== "); ok {
			all = append(all, section{name: name})
			continue
		}
		if len(all) == 0 {
			if strings.TrimSpace(line) == "" {
				continue
			}
			return nil, badSample("text before the first section")
		}
		all[len(all)-1].lines = append(all[len(all)-1].lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, badSample("%v", err)
	}
	return all, nil
}

// cpuTimes is /proc/stat's cpu line: all jiffies, and the idle ones
// (idle and iowait).
type cpuTimes struct{ total, idle uint64 }

func parseCPU(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") {
		return cpuTimes{}, badSample("cpu line %q", clip(line))
	}
	var t cpuTimes
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, badSample("cpu line %q", clip(line))
		}
		if i >= 8 { // guest and guest_nice are in user and nice already
			break
		}
		t.total += v
		if i == 3 || i == 4 {
			t.idle += v
		}
	}
	return t, nil
}

// busy is the share of the jiffies between a and b that were not idle,
// in percent.
func busy(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	idle := float64(0)
	if b.idle > a.idle {
		idle = float64(b.idle - a.idle)
	}
	p := 100 * (1 - idle/float64(b.total-a.total))
	return min(max(p, 0), 100)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// ParseMetrics reads metricsScript's output. SampledAt is left zero.
func ParseMetrics(out []byte) (Metrics, error) {
	secs, err := sections(out)
	if err != nil {
		return Metrics{}, err
	}
	var (
		m     Metrics
		stats [][]string
		seen  = map[string]bool{}
	)
	for _, s := range secs {
		if s.name != "stat" && seen[s.name] {
			return Metrics{}, badSample("section %q twice", s.name)
		}
		seen[s.name] = true
		switch s.name {
		case "stat":
			stats = append(stats, s.lines)
		case "meminfo":
			if err := m.meminfo(s.lines); err != nil {
				return Metrics{}, err
			}
		case "fs":
			if err := m.fs(s.lines); err != nil {
				return Metrics{}, err
			}
		case "net":
			if err := m.net(s.lines); err != nil {
				return Metrics{}, err
			}
		case "io":
			p, err := ioPressure(s.lines)
			if err != nil {
				return Metrics{}, err
			}
			m.IOPressure = p
		default:
			return Metrics{}, badSample("unknown section %q", clip(s.name))
		}
	}
	for _, want := range []string{"meminfo", "fs", "net"} {
		if !seen[want] {
			return Metrics{}, badSample("no %s section", want)
		}
	}
	if len(stats) != 2 || len(stats[0]) == 0 || len(stats[1]) == 0 {
		return Metrics{}, badSample("want two samples of /proc/stat")
	}
	a, err := parseCPU(stats[0][0])
	if err != nil {
		return Metrics{}, err
	}
	b, err := parseCPU(stats[1][0])
	if err != nil {
		return Metrics{}, err
	}
	m.CPUPercent = busy(a, b)
	for _, l := range stats[1][1:] {
		if len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
			m.CPUCount++
		}
	}
	if m.CPUCount == 0 {
		m.CPUCount = 1
	}
	return m, nil
}

func (m *Metrics) meminfo(lines []string) error {
	var total, avail int64 = -1, -1
	for _, l := range lines {
		key, rest, ok := strings.Cut(l, ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return badSample("meminfo line %q", clip(l))
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || v < 0 || v > 1<<52 {
			return badSample("meminfo line %q", clip(l))
		}
		if key == "MemTotal" {
			total = v << 10
		} else {
			avail = v << 10
		}
	}
	if total < 0 || avail < 0 {
		return badSample("meminfo has no MemTotal or MemAvailable")
	}
	m.MemoryTotalBytes, m.MemoryUsedBytes = total, max(total-avail, 0)
	return nil
}

func (m *Metrics) fs(lines []string) error {
	if len(lines) != 1 {
		return badSample("want one line of stat -f")
	}
	f := strings.Fields(lines[0])
	if len(f) != 3 {
		return badSample("stat -f line %q", clip(lines[0]))
	}
	var v [3]int64
	for i, s := range f {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > 1<<52 {
			return badSample("stat -f line %q", clip(lines[0]))
		}
		v[i] = n
	}
	size, blocks, free := v[0], v[1], v[2]
	if size == 0 || size > 1<<20 || free > blocks || blocks > (1<<62)/size {
		return badSample("stat -f line %q", clip(lines[0]))
	}
	m.DiskTotalBytes, m.DiskUsedBytes = blocks*size, (blocks-free)*size
	return nil
}

func (m *Metrics) net(lines []string) error {
	for _, l := range lines {
		name, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue // the two header lines
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if len(f) < 16 {
			return badSample("net line %q", clip(l))
		}
		rx, err1 := strconv.ParseInt(f[0], 10, 64)
		tx, err2 := strconv.ParseInt(f[8], 10, 64)
		if err1 != nil || err2 != nil || rx < 0 || tx < 0 || rx > 1<<60 || tx > 1<<60 {
			return badSample("net line %q", clip(l))
		}
		if name == "lo" {
			continue
		}
		m.NetworkRxBytes += rx
		m.NetworkTxBytes += tx
		if m.NetworkRxBytes > 1<<62 || m.NetworkTxBytes > 1<<62 {
			return badSample("network bytes out of range")
		}
	}
	return nil
}

// ioPressure reads "some avg10=… avg60=… avg300=… total=…"; no lines is
// no PSI.
func ioPressure(lines []string) (*float64, error) {
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "avg60="); ok {
				p, err := strconv.ParseFloat(v, 64)
				if err != nil || p < 0 || p > 100 {
					return nil, badSample("io pressure %q", clip(l))
				}
				return &p, nil
			}
		}
		return nil, badSample("io pressure %q has no avg60", clip(l))
	}
	return nil, nil
}

// procStat is what a /proc/[pid]/stat line says.
type procStat struct {
	pid, ppid int
	state     string
	name      string
	jiffies   uint64
	rssPages  int64
}

func parseProcStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return procStat{}, badSample("process line %q", clip(line))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil || pid <= 0 {
		return procStat{}, badSample("process line %q", clip(line))
	}
	// After the name: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// threads itrealvalue starttime vsize rss …
	f := strings.Fields(line[end+1:])
	if len(f) < 22 {
		return procStat{}, badSample("process line %q", clip(line))
	}
	ps := procStat{pid: pid, state: f[0], name: line[open+1 : end]}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	rss, err4 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || ut > 1<<60 || st > 1<<60 {
		return procStat{}, badSample("process line %q", clip(line))
	}
	ps.ppid, ps.jiffies, ps.rssPages = ppid, ut+st, max(rss, 0)
	return ps, nil
}

// parseCommandLines reads head's output of every process's cmdline into
// cmds: a "==> PID/cmdline <==" line, then the command line (a line
// break in it makes more lines, joined again by a space), and a blank
// line between files.
func parseCommandLines(lines []string, cmds map[int]string) error {
	pid := 0
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "==> "); ok && strings.HasSuffix(rest, "/cmdline <==") {
			n, err := strconv.Atoi(strings.TrimSuffix(rest, "/cmdline <=="))
			if err != nil || n <= 0 {
				return badSample("command line header %q", clip(l))
			}
			pid = n
			cmds[pid] = ""
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		if pid == 0 {
			return badSample("command line %q before its header", clip(l))
		}
		cmds[pid] = strings.TrimSpace(cmds[pid] + " " + l)
	}
	return nil
}

// ParseProcesses reads processScript's output: the busiest first (then
// by memory, then pid), at most MaxProcesses. A process that ended
// between the two samples is left out.
func ParseProcesses(out []byte) ([]Process, error) {
	secs, err := sections(out)
	if err != nil {
		return nil, err
	}
	var (
		page    int64
		samples []section
		cmds    = map[int]string{}
		gotCmd  bool
		gotPage bool
	)
	for _, s := range secs {
		switch s.name {
		case "page":
			if gotPage || len(s.lines) != 1 {
				return nil, badSample("want one page size")
			}
			page, err = strconv.ParseInt(strings.TrimSpace(s.lines[0]), 10, 64)
			if err != nil || page <= 0 || page > 1<<30 {
				return nil, badSample("page size %q", clip(s.lines[0]))
			}
			gotPage = true
		case "stat":
			samples = append(samples, s)
		case "cmd":
			if gotCmd {
				return nil, badSample("section \"cmd\" twice")
			}
			gotCmd = true
			if err := parseCommandLines(s.lines, cmds); err != nil {
				return nil, err
			}
		default:
			return nil, badSample("unknown section %q", clip(s.name))
		}
	}
	if !gotPage || !gotCmd || len(samples) != 2 || len(samples[0].lines) == 0 || len(samples[1].lines) == 0 {
		return nil, badSample("want a page size, two samples and the command lines")
	}
	var cpu [2]cpuTimes
	procs := [2]map[int]procStat{{}, {}}
	for i, s := range samples {
		if cpu[i], err = parseCPU(s.lines[0]); err != nil {
			return nil, err
		}
		for _, l := range s.lines[1:] {
			ps, err := parseProcStat(l)
			if err != nil {
				return nil, err
			}
			procs[i][ps.pid] = ps
		}
	}
	span := float64(0)
	if cpu[1].total > cpu[0].total {
		span = float64(cpu[1].total - cpu[0].total)
	}
	list := make([]Process, 0, len(procs[1]))
	for pid, b := range procs[1] {
		a, ok := procs[0][pid]
		if !ok {
			a = b // born between the samples: no CPU time to tell
		}
		p := Process{PID: pid, PPID: b.ppid, State: b.state, Name: b.name,
			MemoryBytes: min(b.rssPages, (1<<62)/page) * page, Command: cmds[pid]}
		if len(p.Command) > maxCommandLine {
			p.Command = strings.ToValidUTF8(p.Command[:maxCommandLine], "")
		}
		if span > 0 && b.jiffies > a.jiffies {
			p.CPUPercent = min(100*float64(b.jiffies-a.jiffies)/span, 100)
		}
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.CPUPercent != b.CPUPercent {
			return a.CPUPercent > b.CPUPercent
		}
		if a.MemoryBytes != b.MemoryBytes {
			return a.MemoryBytes > b.MemoryBytes
		}
		return a.PID < b.PID
	})
	if len(list) > MaxProcesses {
		list = list[:MaxProcesses]
	}
	return list, nil
}
