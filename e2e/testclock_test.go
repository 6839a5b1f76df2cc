package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// FROOG_TEST_CLOCK_FILE moves hostctl's clock in test builds only (issue
// #24 item 7a). With the clock moved two hours on, a test build's
// hostctl stops a sandbox whose auto-stop is a minute away within a few
// seconds; a release build (make build's: no froogtest tag) leaves it
// running. The test build's case is what makes the release build's
// meaningful: the same steps, the same wait.
func TestTestClockOnlyInTestBuilds(t *testing.T) {
	t.Parallel()
	release := filepath.Join(t.TempDir(), "froogd")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", release, froogdPkg).CombinedOutput(); err != nil {
		t.Fatalf("build a release froogd: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		name  string
		bin   string
		stops bool
	}{
		{"test build", froogd, true},
		{"release build", release, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, clock := t.TempDir(), clockFile(t)
			cmd := exec.Command(tt.bin, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), "FROOG_TEST_CLOCK_FILE="+clock)
			_, m := startCmd(t, devReady, cmd, cmd.Args[1:])
			key, _ := os.ReadFile(filepath.Join(data, "api-key"))
			c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
			c.call("POST", "/v1/sandboxes", `{"name": "clk", "ttl_secs": 60}`, 202, nil)
			runsWithin(t, c, "clk", 30*time.Second)
			if err := os.WriteFile(clock, []byte("2h"), 0o600); err != nil {
				t.Fatal(err)
			}
			var sb struct{ State string }
			stopped := wait.Until(15*time.Second, func() bool {
				c.call("GET", "/v1/sandboxes/clk", "", 200, &sb)
				return sb.State != "running"
			})
			if stopped != tt.stops {
				t.Fatalf("with the clock 2 h ahead: state %q after 15 s, want stopped: %v", sb.State, tt.stops)
			}
		})
	}
}
