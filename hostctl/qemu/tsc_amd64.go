package qemu

import (
	"slices"
	"sync"
	"time"
)

func rdtsc() uint64

// hostTSCkHz is the host's TSC frequency in kHz, measured once against
// the monotonic clock: under TCG the guest's TSC is the host's (QEMU
// reads it for the guest's RDTSC), so the guest is told it (cmdline)
// rather than left to measure it.
var hostTSCkHz = sync.OnceValue(measureTSCkHz)

// measureTSCkHz is the median of three measures of the TSC's rate across
// 20 ms, from up to ten tries; 0 (the guest measures it) when no try
// could read the TSC and the clock together.
func measureTSCkHz() int {
	var khz []int
	for try := 0; try < 10 && len(khz) < 3; try++ {
		c0, t0, ok0 := tscAt()
		time.Sleep(20 * time.Millisecond)
		c1, t1, ok1 := tscAt()
		if ok0 && ok1 && c1 > c0 {
			khz = append(khz, int(float64(c1-c0)/float64(t1.Sub(t0))*1e6))
		}
	}
	if len(khz) == 0 {
		return 0
	}
	slices.Sort(khz)
	return khz[len(khz)/2]
}

// tscAt reads the TSC and the clock together: ok when no more than 20 µs
// went by around the read (the thread was not preempted in between),
// tried up to 100 times.
func tscAt() (uint64, time.Time, bool) {
	for range 100 {
		before := time.Now()
		c := rdtsc()
		after := time.Now()
		if d := after.Sub(before); d <= 20*time.Microsecond {
			return c, before.Add(d / 2), true
		}
	}
	return 0, time.Time{}, false
}
