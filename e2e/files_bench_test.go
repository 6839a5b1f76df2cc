//go:build bench

package e2e_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/filesbench"
)

// TestFilesBenchQEMU measures the files API against OpenSSH on the qemu
// driver (make bench; FROOG_BENCH=1; internal/filesbench): froogd dev with
// the test guest under TCG, an 8 MiB file (small: TCG moves 3-15 MB/s,
// each transfer runs three times, and make bench has 15 minutes), OpenSSH straight to the guest's sshd and
// sftp-server, logged in with the account's SSH key. Results in .bench/files-qemu.json.
func TestFilesBenchQEMU(t *testing.T) {
	// Alone: a benchmark; it measures CPU time, which other tests would share.
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (FROOG_BENCH=1)")
	}
	tiny := tinyGuest(t)
	data := t.TempDir()
	t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
	_, m := start(t, devReady, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--domain", "froog.test",
		"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
		"--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", filepath.Join(tiny, "initramfs.gz"),
		"--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1")
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	mine, _ := ssh.NewSignerFromKey(priv)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	pub, _ := json.Marshal(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(mine.PublicKey()))))
	c.call("POST", "/v1/ssh-keys", `{"public_key": `+string(pub)+`}`, 201, nil)
	c.call("POST", "/v1/sandboxes", `{"name": "bench"}`, 202, nil)
	runs(t, c, "bench")
	var at struct {
		Host, User string
		Port       int
	}
	c.call("GET", "/v1/sandboxes/bench/ssh", "", 200, &at)
	filesbench.Run(t, filesbench.Target{API: c.base, Key: c.key, Sandbox: "bench",
		Host: at.Host, User: at.User, Port: at.Port, KeyFile: keyFile, Home: "/home/" + at.User, Size: 8 << 20},
		"../.bench/files-qemu.json")
}
