package api_test

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

	"froog.tech/froog/api"
)

// TestFilesBench measures the files API against OpenSSH (make bench;
// FROOG_BENCH=1): a 256 MiB file uploaded and downloaded through the API
// (PUT and GET files/content: HTTP to the API, SFTP over the tunnel to
// the sandbox) and with OpenSSH's sftp and scp straight to the same
// sandbox's SSH server (the local driver's). Each is the best of three
// runs, in MB/s (10^6 bytes). Results in .bench/files.json.
func TestFilesBench(t *testing.T) {
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (FROOG_BENCH=1)")
	}
	for _, bin := range []string{"sftp", "scp"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("OpenSSH's %s is missing (deploy/testdeps.sh installs it)", bin)
		}
	}
	const size = 256 << 20
	st := backends[0].open(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	e := liveWith(t, st, signer, api.Options{MaxFileBytes: 1 << 30})
	id := e.running("bench")

	// The OpenSSH client logs in with the control plane's key, the only
	// one the local driver's SSH server takes.
	dir := t.TempDir()
	block, _ := ssh.MarshalPrivateKey(priv, "")
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	var at struct {
		Host string
		Port int
	}
	e.do("GET", "/v1/sandboxes/bench/ssh", e.admin, nil).want(t, 200, "").json(t, &at)
	sshArgs := []string{"-q", "-i", keyFile, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"}

	src := filepath.Join(dir, "src.bin")
	f, _ := os.Create(src)
	io.CopyN(f, rand.Reader, size)
	f.Close()
	home := e.home(id)

	mbps := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	best := func(name string, run func() error) float64 {
		var top float64
		for range 3 {
			os.Remove(filepath.Join(home, "dst.bin"))
			start := time.Now()
			if err := run(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			top = max(top, mbps(time.Since(start)))
		}
		t.Logf("%-14s %7.1f MB/s", name, top)
		return top
	}
	apiPut := func() error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		req, _ := http.NewRequest("PUT", e.srv.URL+"/v1/sandboxes/bench/files/content?path=dst.bin", f)
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer "+e.admin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			b, _ := io.ReadAll(res.Body)
			return fmt.Errorf("%d %s", res.StatusCode, b)
		}
		return nil
	}
	apiGet := func() error {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/sandboxes/bench/files/content?path=src.bin", nil)
		req.Header.Set("Authorization", "Bearer "+e.admin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		// Into a file, as sftp and scp write theirs.
		out, err := os.Create(filepath.Join(dir, "got.bin"))
		if err != nil {
			return err
		}
		defer out.Close()
		n, err := io.Copy(out, res.Body)
		if err == nil && n != size {
			err = fmt.Errorf("%d bytes", n)
		}
		return err
	}
	sftp := func(cmd string) func() error {
		return func() error {
			c := exec.Command("sftp", append(append([]string{}, sshArgs...), "-P", strconv.Itoa(at.Port), "-b", "-", "user@"+at.Host)...)
			c.Stdin = strings.NewReader(cmd + "\n")
			out, err := c.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
	}
	scp := func(from, to string) func() error {
		return func() error {
			out, err := exec.Command("scp", append(append([]string{"-v"}, sshArgs[1:]...), "-P", strconv.Itoa(at.Port), from, to)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
	}
	remote := "user@" + at.Host + ":"
	// The file to download, in place first.
	if err := sftp("put " + src + " " + home + "/src.bin")(); err != nil {
		t.Fatal(err)
	}
	res := map[string]float64{
		"api_upload":     best("api upload", apiPut),
		"sftp_upload":    best("sftp upload", sftp("put "+src+" "+home+"/dst.bin")),
		"scp_upload":     best("scp upload", scp(src, remote+home+"/dst.bin")),
		"api_download":   best("api download", apiGet),
		"sftp_download":  best("sftp download", sftp("get "+home+"/src.bin "+filepath.Join(dir, "got.bin"))),
		"scp_download":   best("scp download", scp(remote+home+"/src.bin", filepath.Join(dir, "got.bin"))),
		"file_size_mib":  size >> 20,
		"upload_ratio":   0,
		"download_ratio": 0,
	}
	res["upload_ratio"] = res["api_upload"] / res["sftp_upload"]
	res["download_ratio"] = res["api_download"] / res["sftp_download"]
	t.Logf("API / OpenSSH sftp: upload %.2f×, download %.2f×", res["upload_ratio"], res["download_ratio"])
	b, _ := json.MarshalIndent(res, "", "  ")
	os.MkdirAll("../.bench", 0o755)
	os.WriteFile("../.bench/files.json", b, 0o644)
}
