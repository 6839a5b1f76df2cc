package qemu

import "testing"

// Under TCG the guest's TSC is trusted (its clocksource watchdog would
// otherwise trade it for the emulated HPET on a loaded host); under KVM
// the image's command line is passed as it is.
func TestCmdline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ image, accel, want string }{
		{"root=/dev/vda console=ttyS0", "tcg", "root=/dev/vda console=ttyS0 tsc=reliable"},
		{"", "tcg", "tsc=reliable"},
		{"root=/dev/vda console=ttyS0", "kvm", "root=/dev/vda console=ttyS0"},
	} {
		if got := cmdline(c.image, c.accel); got != c.want {
			t.Errorf("cmdline(%q, %s) = %q, want %q", c.image, c.accel, got, c.want)
		}
	}
}
