package testkit_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
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

// A server that sends a ServerCutText, then a framebuffer of two
// rectangles: RFB.Pixel finds the one the pixel is in.
func TestRFB(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	shared := make(chan byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		c.Write([]byte("RFB 003.008\n"))
		io.ReadFull(c, buf[:12])
		c.Write([]byte{2, 2, 1}) // VNC auth, None
		io.ReadFull(c, buf[:1])
		c.Write([]byte{0, 0, 0, 0})
		io.ReadFull(c, buf[:1])
		shared <- buf[0]
		init := []byte{0, 4, 0, 2, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0, 0, 0, 0, 1, 'x'}
		c.Write(init)
		io.ReadFull(c, buf[:20+8+10]) // SetPixelFormat, SetEncodings, the request
		msg := []byte{3, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'}
		msg = append(msg, 0, 0, 0, 2)
		// A 2x2 rectangle at (0,0) of blue, one at (2,0) of (1,2,3).
		msg = append(msg, 0, 0, 0, 0, 0, 2, 0, 2, 0, 0, 0, 0)
		msg = append(msg, bytes.Repeat(binary.LittleEndian.AppendUint32(nil, 0xff), 4)...)
		msg = append(msg, 0, 2, 0, 0, 0, 2, 0, 2, 0, 0, 0, 0)
		msg = append(msg, bytes.Repeat(binary.LittleEndian.AppendUint32(nil, 0x010203), 4)...)
		c.Write(msg)
		io.ReadFull(c, buf[:1])
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	c, err := testkit.DialRFB(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.W != 4 || c.H != 2 || <-shared != 1 {
		t.Fatalf("size %dx%d", c.W, c.H)
	}
	px, err := c.Pixel(3, 1)
	if err != nil || px != [3]byte{1, 2, 3} {
		t.Fatalf("pixel (3,1): %v, %v; want [1 2 3]", px, err)
	}
}
