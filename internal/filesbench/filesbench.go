// Package filesbench measures froog's files API against OpenSSH on the
// same sandbox, for make bench: a file uploaded and downloaded through the
// API (PUT and GET files/content: HTTP to the API, SFTP over the tunnel
// to the sandbox) and with OpenSSH's sftp and scp logged straight in to
// the sandbox's SSH server. Each figure is the best of three runs, in MB/s
// (10^6 bytes).
package filesbench

import (
	"crypto/rand"
	"encoding/json"
	"errors"
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
)

// Target is the sandbox measured.
type Target struct {
	API, Key string // the API's base URL and a key with the files scope
	Sandbox  string // the sandbox's name
	// Its SSH server, a user it takes, and a private key file it takes.
	Host, User string
	Port       int
	KeyFile    string
	Home       string // the user's home folder in the sandbox
	Size       int64  // the file's size
}

// Run measures t's target and writes the figures, as JSON, to out.
func Run(t *testing.T, tg Target, out string) map[string]float64 {
	t.Helper()
	for _, bin := range []string{"sftp", "scp"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("OpenSSH's %s is missing (deploy/testdeps.sh installs it)", bin)
		}
	}
	dir := t.TempDir()
	src, got := filepath.Join(dir, "src.bin"), filepath.Join(dir, "got.bin")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.CopyN(f, rand.Reader, tg.Size)
	if err = errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}

	best := func(name string, run func() error) float64 {
		var top float64
		for range 3 {
			start := time.Now()
			if err := run(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			top = max(top, float64(tg.Size)/1e6/time.Since(start).Seconds())
		}
		t.Logf("%-14s %7.1f MB/s", name, top)
		return top
	}
	// api calls files/content; a download goes into a file, as sftp and
	// scp write theirs.
	api := func(method string) func() error {
		return func() error {
			var body io.Reader
			if method == "PUT" {
				f, err := os.Open(src)
				if err != nil {
					return err
				}
				defer f.Close()
				body = f
			}
			req, err := http.NewRequest(method, tg.API+"/v1/sandboxes/"+tg.Sandbox+"/files/content?path=up.bin", body)
			if err != nil {
				return err
			}
			if method == "PUT" {
				req.ContentLength = tg.Size
			}
			req.Header.Set("Authorization", "Bearer "+tg.Key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			if res.StatusCode != 200 {
				msg, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10)) // the API's error, which names what failed
				return fmt.Errorf("%s: %d %s", method, res.StatusCode, msg)
			}
			var sink io.Writer = io.Discard
			if method == "GET" {
				out, err := os.Create(got)
				if err != nil {
					return err
				}
				defer out.Close()
				sink = out
			}
			n, err := io.Copy(sink, res.Body)
			if method == "GET" && n != tg.Size {
				return fmt.Errorf("GET: %d of %d bytes, %v", n, tg.Size, err)
			}
			return err
		}
	}
	args := []string{"-q", "-i", tg.KeyFile, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-P", strconv.Itoa(tg.Port)}
	openssh := func(bin, stdin string, more ...string) func() error {
		return func() error {
			c := exec.Command(bin, append(append([]string{}, args...), more...)...)
			c.Stdin = strings.NewReader(stdin)
			if out, err := c.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v: %s", bin, err, out)
			}
			return nil
		}
	}
	login := tg.User + "@" + tg.Host
	remote := login + ":" + tg.Home + "/up.bin"
	sftp := func(cmd string) func() error { return openssh("sftp", cmd+"\n", "-b", "-", login) }
	res := map[string]float64{
		"api_upload":    best("api upload", api("PUT")),
		"sftp_upload":   best("sftp upload", sftp("put "+src+" "+tg.Home+"/up.bin")),
		"scp_upload":    best("scp upload", openssh("scp", "", src, remote)),
		"api_download":  best("api download", api("GET")),
		"sftp_download": best("sftp download", sftp("get "+tg.Home+"/up.bin "+got)),
		"scp_download":  best("scp download", openssh("scp", "", remote, got)),
		"file_size_mib": float64(tg.Size >> 20),
	}
	res["upload_ratio"] = res["api_upload"] / res["sftp_upload"]
	res["download_ratio"] = res["api_download"] / res["sftp_download"]
	t.Logf("API / OpenSSH sftp: upload %.2f×, download %.2f×", res["upload_ratio"], res["download_ratio"])
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := errors.Join(os.MkdirAll(filepath.Dir(out), 0o755), os.WriteFile(out, b, 0o644)); err != nil {
		t.Fatal(err)
	}
	return res
}
