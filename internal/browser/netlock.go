package browser

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Chromium fails a page load in flight with net::ERR_NETWORK_CHANGED when
// the host's network changes under it, and `go test ./...` runs packages
// side by side: a test that makes namespaces, bridges or taps (the
// cluster, fault and tap tests) and one that drives Chromium must not
// overlap. Both take this lock, on a file shared by every test process of
// the machine, for the rest of the test.

// ChangingNetwork holds the lock alone until t ends: nothing watches.
func ChangingNetwork(t testing.TB) { netLock(t, syscall.LOCK_EX) }

// Watching holds the lock with other watchers until t ends: nothing
// changes the network meanwhile.
func Watching(t testing.TB) { netLock(t, syscall.LOCK_SH) }

func netLock(t testing.TB, how int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "froog-test-network.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("the network lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("the network lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases it
}
