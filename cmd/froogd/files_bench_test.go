package main_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// TestFilesBenchQEMU measures the files API against OpenSSH on the qemu
// driver (make bench; FROOG_BENCH=1): froogd dev with the test guest
// under TCG, a 64 MiB file (the guest's disk is 1 GiB) up and down
// through the API (PUT and GET files/content) and with OpenSSH's sftp
// and scp straight to the guest's dropbear and sftp-server, logged in
// with the account's SSH key. Best of three, MB/s. Results in
// .bench/files-qemu.json.
func TestFilesBenchQEMU(t *testing.T) {
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (FROOG_BENCH=1)")
	}
	const size = 64 << 20
	tiny := tinyGuest(t)
	data := t.TempDir()
	t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
	_, m := start(t, devReady, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--domain", "froog.test",
		"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
		"--kernel", filepath.Join(tiny, "vmlinuz"), "--initrd", filepath.Join(tiny, "initramfs.gz"),
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
	sshArgs := []string{"-q", "-i", keyFile, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-P", strconv.Itoa(at.Port)}

	src := filepath.Join(dir, "src.bin")
	f, _ := os.Create(src)
	io.CopyN(f, rand.Reader, size)
	f.Close()
	mbps := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	best := func(name string, run func() error) float64 {
		var top float64
		for range 3 {
			start := time.Now()
			if err := run(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			top = max(top, mbps(time.Since(start)))
		}
		t.Logf("%-14s %7.1f MB/s", name, top)
		return top
	}
	do := func(method, path string, body io.Reader) error {
		req, _ := http.NewRequest(method, c.base+path, body)
		req.Header.Set("Authorization", "Bearer "+c.key)
		if body != nil {
			req.ContentLength = size
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		// A download goes into a file, as sftp and scp write theirs.
		var sink io.Writer = io.Discard
		if method == "GET" {
			out, err := os.Create(filepath.Join(dir, "got.bin"))
			if err != nil {
				return err
			}
			defer out.Close()
			sink = out
		}
		n, err := io.Copy(sink, res.Body)
		if res.StatusCode != 200 || (method == "GET" && n != size) {
			return fmt.Errorf("%s %s: %d, %d bytes, %v", method, path, res.StatusCode, n, err)
		}
		return err
	}
	openssh := func(bin string, args ...string) func() error {
		return func() error {
			out, err := exec.Command(bin, append(append([]string{}, sshArgs...), args...)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
	}
	sftp := func(cmd string) func() error {
		return func() error {
			c := exec.Command("sftp", append(append([]string{}, sshArgs...), "-b", "-", at.User+"@"+at.Host)...)
			c.Stdin = strings.NewReader(cmd + "\n")
			if out, err := c.CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
	}
	remote := at.User + "@" + at.Host + ":"
	res := map[string]float64{
		"api_upload": best("api upload", func() error {
			f, _ := os.Open(src)
			defer f.Close()
			return do("PUT", "/v1/sandboxes/bench/files/content?path=up.bin", f)
		}),
		"sftp_upload":   best("sftp upload", sftp("put "+src+" /home/user/up.bin")),
		"scp_upload":    best("scp upload", openssh("scp", src, remote+"/home/user/up.bin")),
		"api_download":  best("api download", func() error { return do("GET", "/v1/sandboxes/bench/files/content?path=up.bin", nil) }),
		"sftp_download": best("sftp download", sftp("get /home/user/up.bin "+filepath.Join(dir, "got.bin"))),
		"scp_download":  best("scp download", openssh("scp", remote+"/home/user/up.bin", filepath.Join(dir, "got.bin"))),
		"file_size_mib": size >> 20,
	}
	res["upload_ratio"] = res["api_upload"] / res["sftp_upload"]
	res["download_ratio"] = res["api_download"] / res["sftp_download"]
	t.Logf("API / OpenSSH sftp: upload %.2f×, download %.2f×", res["upload_ratio"], res["download_ratio"])
	b, _ := json.MarshalIndent(res, "", "  ")
	os.MkdirAll("../../.bench", 0o755)
	os.WriteFile("../../.bench/files-qemu.json", b, 0o644)
}
