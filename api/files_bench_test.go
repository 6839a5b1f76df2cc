//go:build bench

package api_test

import (
	"os"
	"path/filepath"
	"testing"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/filesbench"
)

// TestFilesBench measures the files API against OpenSSH on the local
// driver (make bench; FROOG_BENCH=1; internal/filesbench): a 256 MiB file,
// the API's limit raised for it. Results in .bench/files.json.
func TestFilesBench(t *testing.T) {
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (FROOG_BENCH=1)")
	}
	st := backends[0].open(t)
	e := liveWith(t, st, api.Options{MaxFileBytes: 1 << 30})
	id := e.running("bench")

	// The OpenSSH client logs in with the control plane's key, the only
	// one the local driver's SSH server takes.
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, e.keyPEM, 0o600)
	var at struct {
		Host string
		Port int
	}
	e.do("GET", "/v1/sandboxes/bench/ssh", e.admin, nil).want(t, 200, "").json(t, &at)
	filesbench.Run(t, filesbench.Target{API: e.srv.URL, Key: e.admin, Sandbox: "bench",
		Host: at.Host, User: "user", Port: at.Port, KeyFile: keyFile, Home: e.home(id), Size: 256 << 20},
		"../.bench/files.json")
}
