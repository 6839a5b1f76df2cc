package sandboxio

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// The scripts run on this Linux host, and what they print parses.
func TestMetricsScriptsOnThisHost(t *testing.T) {
	out, err := exec.Command("sh", "-c", metricsScript).Output()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMetrics(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if m.CPUCount < 1 || m.MemoryTotalBytes <= 0 || m.MemoryUsedBytes > m.MemoryTotalBytes ||
		m.DiskTotalBytes <= 0 || m.DiskUsedBytes > m.DiskTotalBytes || m.CPUPercent < 0 || m.CPUPercent > 100 {
		t.Errorf("metrics %+v", m)
	}
	out, err = exec.Command("sh", "-c", processScript).Output()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ParseProcesses(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(ps) == 0 || len(ps) > MaxProcesses {
		t.Fatalf("%d processes", len(ps))
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].CPUPercent > ps[i-1].CPUPercent {
			t.Fatalf("not busiest first: %+v before %+v", ps[i-1], ps[i])
		}
	}
}

const goodMetrics = `== stat
cpu  100 0 100 700 100 0 0 0 0 0
cpu0 50 0 50 350 50 0 0 0 0 0
cpu1 50 0 50 350 50 0 0 0 0 0
== stat
cpu  150 0 150 800 100 0 0 0 0 0
cpu0 75 0 75 400 50 0 0 0 0 0
cpu1 75 0 75 400 50 0 0 0 0 0
== meminfo
MemTotal:        8000000 kB
MemFree:         1000000 kB
MemAvailable:    6000000 kB
== fs
4096 1000 250
== net
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 5000 10 0 0 0 0 0 0 5000 10 0 0 0 0 0 0
  eth0: 300 3 0 0 0 0 0 0 40 1 0 0 0 0 0 0
  eth1: 1 1 0 0 0 0 0 0 2 1 0 0 0 0 0 0
== io
some avg10=1.50 avg60=2.25 avg300=0.10 total=12345
full avg10=0.00 avg60=0.00 avg300=0.00 total=100
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics([]byte(goodMetrics))
	if err != nil {
		t.Fatal(err)
	}
	// 200 jiffies passed, 100 of them idle.
	if m.CPUCount != 2 || m.CPUPercent != 50 {
		t.Errorf("cpu %d %v", m.CPUCount, m.CPUPercent)
	}
	if m.MemoryTotalBytes != 8000000<<10 || m.MemoryUsedBytes != 2000000<<10 {
		t.Errorf("memory %d of %d", m.MemoryUsedBytes, m.MemoryTotalBytes)
	}
	if m.DiskTotalBytes != 4096*1000 || m.DiskUsedBytes != 4096*750 {
		t.Errorf("disk %d of %d", m.DiskUsedBytes, m.DiskTotalBytes)
	}
	if m.NetworkRxBytes != 301 || m.NetworkTxBytes != 42 {
		t.Errorf("network %d in, %d out", m.NetworkRxBytes, m.NetworkTxBytes)
	}
	if m.IOPressure == nil || *m.IOPressure != 2.25 {
		t.Errorf("io pressure %v", m.IOPressure)
	}
	noPSI, err := ParseMetrics([]byte(strings.Replace(goodMetrics, "some avg10=1.50 avg60=2.25 avg300=0.10 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=100\n", "", 1)))
	if err != nil || noPSI.IOPressure != nil {
		t.Errorf("without PSI: %v, %v", noPSI.IOPressure, err)
	}
}

func TestParseMetricsMalformed(t *testing.T) {
	for _, tc := range []struct{ name, old, new string }{
		{"empty", goodMetrics, ""},
		{"text first", "== stat\ncpu  100", "hello\n== stat\ncpu  100"},
		{"one sample", "== stat\ncpu  150 0 150 800 100 0 0 0 0 0\ncpu0 75 0 75 400 50 0 0 0 0 0\ncpu1 75 0 75 400 50 0 0 0 0 0\n", ""},
		{"cpu not a number", "cpu  150 0 150 800", "cpu  15x 0 150 800"},
		{"short cpu line", "cpu  150 0 150 800 100 0 0 0 0 0", "cpu  150"},
		{"no meminfo", "== meminfo", "== other"},
		{"no MemAvailable", "MemAvailable:", "MemCached:"},
		{"meminfo not kB", "8000000 kB", "8000000 MB"},
		{"meminfo negative", "8000000 kB", "-8 kB"},
		{"fs fields", "4096 1000 250", "4096 1000"},
		{"fs free past total", "4096 1000 250", "4096 1000 2500"},
		{"fs zero block", "4096 1000 250", "0 1000 250"},
		{"fs huge", "4096 1000 250", "4096 99999999999999999999 250"},
		{"fs two lines", "4096 1000 250", "4096 1000 250\n4096 1000 250"},
		{"net short", "eth0: 300 3 0 0 0 0 0 0 40 1 0 0 0 0 0 0", "eth0: 300 3"},
		{"net not a number", "eth0: 300 3", "eth0: x 3"},
		{"psi bad", "avg60=2.25", "avg60=lots"},
		{"psi out of range", "avg60=2.25", "avg60=250"},
		{"psi no avg60", "avg60=2.25 ", ""},
		{"section twice", "== io", "== net\n== io"},
		{"unknown section", "== io", "== surprise"},
	} {
		badSampleCase(t, tc.name, goodMetrics, tc.old, tc.new, func(b []byte) error { _, err := ParseMetrics(b); return err })
	}
}

// badSampleCase checks that good with old made new is ErrBadSample.
func badSampleCase(t *testing.T, name, good, old, new string, parse func([]byte) error) {
	t.Run(name, func(t *testing.T) {
		in := strings.Replace(good, old, new, 1)
		if in == good {
			t.Fatal("the case changes nothing")
		}
		if err := parse([]byte(in)); !errors.Is(err, ErrBadSample) {
			t.Fatalf("err = %v, want ErrBadSample", err)
		}
	})
}

const goodProcesses = `== page
4096
== stat
cpu  1000 0 0 1000 0 0 0 0 0 0
1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 10 5 0 0 20 0 1 0 1 1000 100 18446744073709551615
42 (my (odd) name) R 1 42 42 0 -1 4194560 100 0 0 0 100 0 0 0 20 0 1 0 1 1000 50 18446744073709551615
77 (gone) S 1 77 77 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 1 1000 50 18446744073709551615
== stat
cpu  1100 0 0 1100 0 0 0 0 0 0
1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 10 25 0 0 20 0 1 0 1 1000 100 18446744073709551615
42 (my (odd) name) R 1 42 42 0 -1 4194560 100 0 0 0 150 0 0 0 20 0 1 0 1 1000 50 18446744073709551615
99 (new) S 1 99 99 0 -1 4194560 100 0 0 0 7 0 0 0 20 0 1 0 1 1000 10 18446744073709551615
== cmd
==> 1/cmdline <==
/sbin/init splash 
==> 2/cmdline <==

==> 42/cmdline <==
python3 -m http.server 
a second line 
`

func TestParseProcesses(t *testing.T) {
	ps, err := ParseProcesses([]byte(goodProcesses))
	if err != nil {
		t.Fatal(err)
	}
	// 200 jiffies passed: 42 took 50 (25%), init 20 (10%), 99 is new.
	want := []Process{
		{PID: 42, PPID: 1, State: "R", CPUPercent: 25, MemoryBytes: 50 * 4096, Name: "my (odd) name", Command: "python3 -m http.server a second line"},
		{PID: 1, PPID: 0, State: "S", CPUPercent: 10, MemoryBytes: 100 * 4096, Name: "init", Command: "/sbin/init splash"},
		{PID: 99, PPID: 1, State: "S", CPUPercent: 0, MemoryBytes: 10 * 4096, Name: "new"},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %+v", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, ps[i], want[i])
		}
	}
}

func TestParseProcessesMalformed(t *testing.T) {
	for _, tc := range []struct{ name, old, new string }{
		{"empty", goodProcesses, ""},
		{"no page", "== page\n4096\n", ""},
		{"bad page", "== page\n4096", "== page\nbig"},
		{"no cmd", "== cmd", "== stat"},
		{"one sample", "== stat\ncpu  1100", "== xstat\ncpu  1100"},
		{"bad cpu", "cpu  1100 0", "cpu  1100 x"},
		{"no parens", "99 (new) S", "99 new S"},
		{"bad pid", "99 (new) S", "x (new) S"},
		{"short process", "99 (new) S 1 99 99 0 -1 4194560 100 0 0 0 7 0 0 0 20 0 1 0 1 1000 10 18446744073709551615", "99 (new) S 1"},
		{"bad utime", "100 0 0 0 7 0", "100 0 0 0 x 0"},
		{"bad cmd pid", "==> 42/cmdline", "==> x/cmdline"},
		{"a command line before its header", "==> 1/cmdline <==\n", ""},
		{"unknown section", "== cmd", "== what\n== cmd"},
	} {
		badSampleCase(t, tc.name, goodProcesses, tc.old, tc.new, func(b []byte) error { _, err := ParseProcesses(b); return err })
	}
}
