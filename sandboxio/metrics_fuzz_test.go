package sandboxio

import (
	"errors"
	"testing"
)

// FuzzParseSamples: any output parses or is ErrBadSample, and what
// parses is in range.
func FuzzParseSamples(f *testing.F) {
	f.Add([]byte(goodMetrics))
	f.Add([]byte(goodProcesses))
	f.Add([]byte("== stat\ncpu 1 2 3 4\n== stat\ncpu 1 2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMetrics(b)
		if err != nil && !errors.Is(err, ErrBadSample) {
			t.Fatalf("metrics: %v", err)
		}
		if err == nil && (m.CPUPercent < 0 || m.CPUPercent > 100 || m.MemoryUsedBytes > m.MemoryTotalBytes ||
			m.DiskUsedBytes > m.DiskTotalBytes || m.NetworkRxBytes < 0 || m.NetworkTxBytes < 0 || m.CPUCount < 1) {
			t.Fatalf("metrics out of range: %+v", m)
		}
		ps, err := ParseProcesses(b)
		if err != nil && !errors.Is(err, ErrBadSample) {
			t.Fatalf("processes: %v", err)
		}
		if len(ps) > MaxProcesses {
			t.Fatalf("%d processes", len(ps))
		}
		for i, p := range ps {
			if p.CPUPercent < 0 || p.CPUPercent > 100 || p.MemoryBytes < 0 || len(p.Command) > maxCommandLine {
				t.Fatalf("process out of range: %+v", p)
			}
			if i > 0 && p.CPUPercent > ps[i-1].CPUPercent {
				t.Fatalf("not busiest first")
			}
		}
	})
}
