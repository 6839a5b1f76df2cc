//go:build !amd64

package qemu

// hostTSCkHz is 0 where the host is not x86: QEMU's TCG then derives the
// guest's TSC from another counter, whose rate the guest measures itself.
func hostTSCkHz() int { return 0 }

func measureTSCkHz() int { return 0 }
