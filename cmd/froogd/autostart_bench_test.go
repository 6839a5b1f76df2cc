package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// TestAutoStartBench measures auto-start (make bench; FROOG_BENCH=1): the
// time from a request to a stopped sandbox to the first byte of the app's
// answer, 20 wakes each, with the local driver, with the qemu driver after
// a warm stop (the VM paused) and after a cold one (the VM ended), and the
// edge's own share: from the moment hostctl reports the sandbox running
// (its started_at) to the first byte. Results in .bench/autostart.json.
func TestAutoStartBench(t *testing.T) {
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (FROOG_BENCH=1)")
	}
	const wakes = 20
	tiny := tinyGuest(t)
	qemu := []string{"--driver", "qemu", "--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", filepath.Join(tiny, "initramfs.gz"),
		"--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1"}
	type result struct {
		Path                    string
		P50Ms, P99Ms, HoldP50Ms float64
		Wakes                   int
	}
	var results []result
	for _, run := range []struct {
		name string
		args []string
		app  string // the command that serves index.html on port 8080
	}{
		{"local", nil, "python3 -m http.server 8080"},
		{"qemu-warm", qemu, "busybox httpd -f -p 8080 -h ."},
		{"qemu-cold", append(slices.Clone(qemu), "--warm-secs", "1"), "busybox httpd -f -p 8080 -h ."},
	} {
		// FROOG_BENCH_AUTOSTART=local,qemu-warm runs some, when working on them.
		if only := os.Getenv("FROOG_BENCH_AUTOSTART"); only != "" && !slices.Contains(strings.Split(only, ","), run.name) {
			continue
		}
		data := t.TempDir()
		t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
		args := append([]string{"dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0",
			"--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test", "--rate-limit", "0"}, run.args...)
		p, m := start(t, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), args...)
		key, _ := os.ReadFile(filepath.Join(data, "api-key"))
		c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
		c.call("POST", "/v1/sandboxes", `{"name": "wake", "auto_start": true}`, 202, nil)
		runs(t, c, "wake")
		// The app also starts at each boot (the test guest's per-boot hook),
		// as a service would: a cold start ends every process.
		hook, _ := json.Marshal("#!/bin/sh\nexec " + run.app + "\n")
		c.call("POST", "/v1/sandboxes/wake/exec", `{"command": "echo awake > index.html; mkdir -p .config/froog; cat > .config/froog/on-boot; chmod +x .config/froog/on-boot", "stdin": `+string(hook)+`}`, 200, nil)
		c.call("POST", "/v1/sandboxes/wake/jobs", fmt.Sprintf(`{"command": %q}`, run.app), 201, nil)
		c.call("POST", "/v1/sandboxes/wake/wait", `{"port": 8080, "timeout_secs": 60}`, 200, nil)
		var u struct{ Host string }
		c.call("POST", "/v1/sandboxes/wake/urls", `{"port": 8080, "public": true}`, 201, &u)
		web := edgeClient(t, m[2], filepath.Join(data, "ca.pem"), false)
		var total, hold []time.Duration
		// The account may start a sandbox 20 times a minute (the docs'
		// limit, which the edge keeps): past that a wake is refused, so
		// the wakes keep to it. starts holds when each start was asked.
		starts := []time.Time{time.Now()}
		for i := 0; i < wakes; i++ {
			c.call("POST", "/v1/sandboxes/wake/stop", "", 202, nil)
			wait.For(t, 2*time.Minute, "wake stops", func() bool {
				var sb struct{ State string }
				c.call("GET", "/v1/sandboxes/wake", "", 200, &sb)
				return sb.State == "stopped"
			})
			if run.name == "qemu-cold" {
				wait.For(t, time.Minute, "the VM ends", func() bool {
					out, _ := exec.Command("pgrep", "-f", filepath.Join(data, "vms")).Output()
					return len(out) == 0
				})
			}
			if n := len(starts); n >= store.DefaultStartsPerMinute {
				time.Sleep(time.Until(starts[n-store.DefaultStartsPerMinute].Add(time.Minute + 100*time.Millisecond)))
			}
			web.CloseIdleConnections()
			began := time.Now()
			starts = append(starts, began)
			var res *http.Response
			var asked []string // what each ask got, for a slow wake's log line
			for {
				r, err := web.Get("https://" + u.Host + "/index.html")
				if err != nil {
					t.Fatal(err)
				}
				asked = append(asked, fmt.Sprintf("%d after %v", r.StatusCode, time.Since(began).Round(time.Millisecond)))
				if r.StatusCode != 503 || time.Since(began) > 2*time.Minute {
					res = r
					break
				}
				if b, _ := io.ReadAll(r.Body); !strings.Contains(string(b), "sandbox_starting") {
					t.Fatalf("%s wake %d: 503 %s", run.name, i, b)
				}
				// Past the hold (a cold boot under TCG on a busy machine):
				// ask again, as the starting page does.
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
			var first [1]byte
			io.ReadFull(res.Body, first[:])
			firstByte := time.Now()
			rest, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("%s wake %d: %d %s%s", run.name, i, res.StatusCode, first[:], rest)
			}
			var sb struct {
				StartedAt time.Time `json:"started_at"`
			}
			c.call("GET", "/v1/sandboxes/wake", "", 200, &sb)
			if d := firstByte.Sub(began); d > 5*time.Second {
				lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
				t.Logf("%s wake %d took %v: %v; froogd's last lines:\n%s", run.name, i, d.Round(time.Millisecond), asked,
					strings.Join(lines[max(0, len(lines)-12):], "\n"))
			}
			total = append(total, firstByte.Sub(began))
			hold = append(hold, firstByte.Sub(sb.StartedAt))
		}
		p.stop(t)
		r := result{Path: run.name, P50Ms: ms(pct(total, 50)), P99Ms: ms(pct(total, 99)), HoldP50Ms: ms(pct(hold, 50)), Wakes: wakes}
		t.Logf("%-10s first byte p50 %7.1f ms  p99 %7.1f ms  edge's share p50 %5.1f ms", r.Path, r.P50Ms, r.P99Ms, r.HoldP50Ms)
		results = append(results, r)
	}
	os.MkdirAll("../../.bench", 0o755)
	b, _ := json.MarshalIndent(results, "", "  ")
	os.WriteFile("../../.bench/autostart.json", b, 0o644)
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
