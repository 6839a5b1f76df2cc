package qemu_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/store"
)

func TestScratch(t *testing.T) {
	img := osImage(t, "debian-12")
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	dir := "/tmp/scratchos"
	os.RemoveAll(dir)
	d, err := qemu.New(qemu.Options{Dir: dir, Images: map[string]qemu.Image{"debian-12": img}, ControlKey: signer, Accel: "tcg",
		DiskSize: 4 << 30, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 768}}})
	if err != nil {
		t.Fatal(err)
	}
	defer stopAll(d, dir)
	sb := &store.Sandbox{ID: "sbx_s", Name: "s", Size: "default", OS: "debian-12"}
	t0 := time.Now()
	ep, err := d.Start(ctx, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold start %v", time.Since(t0))
	try := func(what string) {
		for i := 0; i < 5; i++ {
			out, err := sshTry(ep, signer, "echo ok; uptime")
			t.Logf("%s try %d: %q %v", what, i, out, err)
			time.Sleep(500 * time.Millisecond)
		}
	}
	try("after boot")
	d.Pause(ctx, sb)
	time.Sleep(2 * time.Second)
	t0 = time.Now()
	ep, err = d.Start(ctx, sb, nil)
	t.Logf("warm start %v %v", time.Since(t0), err)
	try("after resume")
	out, err := sshTry(ep, signer, "sudo journalctl -u ssh --no-pager | tail -20")
	t.Logf("journal: %s %v", out, err)
}

func sshTry(ep hostctl.Endpoint, signer ssh.Signer, cmd string) (string, error) {
	key, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	c, err := ssh.Dial("tcp", ep.Host+":"+strconv.Itoa(ep.Port), &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(key), HostKeyAlgorithms: []string{key.Type()}, Timeout: 10 * time.Second})
	if err != nil {
		return "", err
	}
	defer c.Close()
	s, _ := c.NewSession()
	out, err := s.CombinedOutput(cmd)
	return string(out), err
}
