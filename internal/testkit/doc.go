// Package testkit is what the module's tests share instead of copying it:
// control keys (NewKey, NewKeyPEM), an SSH server that hands its channels
// to the test (FakeSSHServer), a fake clock (FakeClock), a VNC client
// (RFB, over TCP or a websocket: WSStream), the colours of a picture
// (RGBAt, Near), a process's CPU time and /proc fields (CPUTime,
// ProcStat), a bare git repository to clone (BareRepo), a server's log
// into the test's (LogWriter). Waiting with a deadline is
// internal/wait; sandboxes that really run, with the
// tunnel to them, are internal/testkit/live.
//
// Only tests import it: the shipped binary links no package "testing"
// (arch_test.go, TestBinaryLinksNoTesting).
package testkit
