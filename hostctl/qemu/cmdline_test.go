package qemu

import (
	"runtime"
	"testing"
)

// Under TCG the guest's TSC is trusted (its clocksource watchdog would
// otherwise trade it for the emulated HPET on a loaded host), at the
// host's rate where it is known; under KVM the image's command line is
// passed as it is.
func TestCmdline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		image, accel string
		khz          int
		want         string
	}{
		{"root=/dev/vda console=ttyS0", "tcg", 2694873, "root=/dev/vda console=ttyS0 tsc=reliable tsc_early_khz=2694873"},
		{"root=/dev/vda console=ttyS0", "tcg", 0, "root=/dev/vda console=ttyS0 tsc=reliable"},
		{"", "tcg", 0, "tsc=reliable"},
		{"root=/dev/vda console=ttyS0", "kvm", 2694873, "root=/dev/vda console=ttyS0"},
	} {
		if got := cmdline(c.image, c.accel, c.khz); got != c.want {
			t.Errorf("cmdline(%q, %s, %d) = %q, want %q", c.image, c.accel, c.khz, got, c.want)
		}
	}
}

// The host's TSC rate is one an x86 host has, and measured again it is
// the same within the 1 % the guest's kernel checks it to (its refined
// calibration against the HPET, kept only within 1 %).
func TestHostTSCkHz(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("not an x86 host: the guest measures its TSC itself")
	}
	khz := hostTSCkHz()
	if khz < 100_000 || khz > 10_000_000 {
		t.Fatalf("the host's TSC at %d kHz", khz)
	}
	if again := measureTSCkHz(); again < khz*995/1000 || again > khz*1005/1000 {
		t.Fatalf("the host's TSC at %d kHz, then %d", khz, again)
	}
}
