package qemu

import "testing"

// Once a driver of the process found that KVM does not work, every auto
// driver boots with TCG, those made before it too; one asked for KVM
// (--accel kvm) keeps it. Not parallel: kvmFailed is the process's, and
// the package's parallel tests, which boot guests, run once the
// sequential ones have ended.
func TestKVMTriedOncePerProcess(t *testing.T) {
	was := kvmFailed.Load()
	t.Cleanup(func() { kvmFailed.Store(was) })
	kvmFailed.Store(false)
	auto := &Driver{accel: "kvm", auto: true}
	asked := &Driver{accel: "kvm"}
	if got := auto.Accel(); got != "kvm" {
		t.Fatalf("auto before any failed try: %s, want kvm", got)
	}
	kvmFailed.Store(true)
	if got := auto.Accel(); got != "tcg" {
		t.Errorf("auto after another driver's failed try: %s, want tcg", got)
	}
	if got := (&Driver{accel: "kvm", auto: true}).Accel(); got != "tcg" {
		t.Errorf("a new auto driver after a failed try: %s, want tcg", got)
	}
	if got := asked.Accel(); got != "kvm" {
		t.Errorf("--accel kvm after another driver's failed try: %s, want kvm", got)
	}
}
