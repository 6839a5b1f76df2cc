package testkit_test

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/testkit"
)

func TestNewKeyPEM(t *testing.T) {
	s, pemBytes := testkit.NewKeyPEM(t)
	back, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.PublicKey().Marshal(), s.PublicKey().Marshal()) {
		t.Error("the PEM holds another key than the signer")
	}
	if bytes.Equal(testkit.NewKey(t).PublicKey().Marshal(), s.PublicKey().Marshal()) {
		t.Error("two keys are the same")
	}
	line := testkit.AuthorizedKey(s)
	pub, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil || len(rest) != 0 || !bytes.Equal(pub.Marshal(), s.PublicKey().Marshal()) {
		t.Errorf("authorized key %q: %v, rest %q", line, err, rest)
	}
}

func TestFakeClock(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := testkit.NewFakeClock(at)
	if got := c.Now(); !got.Equal(at) {
		t.Fatalf("standing clock: %v, want %v", got, at)
	}
	c.Advance(90 * time.Second)
	if got := c.Now(); !got.Equal(at.Add(90 * time.Second)) {
		t.Fatalf("after Advance: %v", got)
	}

	var real testkit.FakeClock
	c0 := real.Now()
	real.Advance(time.Hour)
	if got := real.Now().Sub(c0); got < time.Hour || got > 2*time.Hour {
		t.Fatalf("zero clock moved %v by an Advance of an hour", got)
	}
}

func TestProc(t *testing.T) {
	f := testkit.ProcStat(os.Getpid())
	if len(f) < 20 || f[1] != strconv.Itoa(os.Getppid()) {
		t.Fatalf("own stat %v: want ppid %d in field 1", f, os.Getppid())
	}
	// Spin until this process has used CPU time the kernel counts.
	for deadline := time.Now().Add(10 * time.Second); testkit.CPUTime(os.Getpid()) == 0 && time.Now().Before(deadline); {
	}
	if testkit.CPUTime(os.Getpid()) == 0 {
		t.Error("no CPU time counted for this process")
	}
	if testkit.RSSKiB(os.Getpid()) == 0 {
		t.Error("no resident set for this process")
	}
	if testkit.ProcStat(-1) != nil || testkit.CPUTime(-1) != 0 {
		t.Error("a process that is not there has a stat")
	}
}

// A server's log written after its test ended is dropped: there
// tb.Output's writer panics (once no test above it runs either).
func TestLogWriterAfterTheTest(t *testing.T) {
	tb := &fakeEndingTB{TB: t}
	w := testkit.LogWriter(tb)
	if n, err := w.Write([]byte("during\n")); n != 7 || err != nil || tb.out.String() != "during\n" {
		t.Fatalf("write during the test: %d, %v, output %q", n, err, tb.out.String())
	}
	for _, f := range tb.cleanups {
		f()
	}
	tb.ended = true
	if n, err := w.Write([]byte("after\n")); n != 6 || err != nil {
		t.Fatalf("write after the test: %d, %v", n, err)
	}
}

// fakeEndingTB is a test that ends when told to: its output panics
// after, as testing's does when no test above it runs.
type fakeEndingTB struct {
	testing.TB
	cleanups []func()
	ended    bool
	out      bytes.Buffer
}

func (f *fakeEndingTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeEndingTB) Output() io.Writer { return f }
func (f *fakeEndingTB) Write(p []byte) (int, error) {
	if f.ended {
		panic("Write called after the test has completed")
	}
	return f.out.Write(p)
}
