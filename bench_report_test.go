package froog_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestPerformanceReport is make bench's last step: it writes
// docs/performance.md from the figures the parts left in .bench/,
// replacing the page (git keeps its history). Every figure is a ratio to
// the peer measured in the same run, with its range over the rounds.
func TestPerformanceReport(t *testing.T) {
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("make bench runs this (FROOG_BENCH=1), after the parts that write .bench/")
	}
	if err := writePerformance(".bench", "docs/performance.md", time.Now(), cpuModel()); err != nil {
		t.Fatal(err)
	}
}

// The report from a small results file: the date, the machine, each
// figure as a ratio to its peer with the range; missing parts are named,
// and a second run replaces the page.
func TestPerformanceMarkdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := results{Rounds: 3, Paths: []pathResult{
		{Path: "direct", Rate: 1000, P50: 0.6, P99: 4},
		{Path: "edge", Rate: 1000, P50: 1.1, P99: 76, P99Range: [2]float64{22, 87}, P999: 111, P999Range: [2]float64{44, 125},
			CPUPerReq: 110, CPUPerReqRange: [2]float64{106, 139}, MBps: 101, MBpsRange: [2]float64{76, 129}, CPUPerMB: 3.65,
			UpMBps: 86, UpMBpsRange: [2]float64{73, 105}, UpCPUPerMB: 1.9},
		{Path: "nginx-ssh", Rate: 1000, P50: 1.5, P99: 81, P99Range: [2]float64{26, 97}, P999: 148, P999Range: [2]float64{40, 149},
			CPUPerReq: 160, CPUPerReqRange: [2]float64{135, 163}, MBps: 158, MBpsRange: [2]float64{139, 368}, CPUPerMB: 2.09,
			UpMBps: 178, UpMBpsRange: [2]float64{177, 182}, UpCPUPerMB: 2.61},
		{Path: "caddy-ssh", Rate: 1000, P99: 22, P99Range: [2]float64{7, 66}, CPUPerReq: 314, CPUPerReqRange: [2]float64{311, 320}},
	}, Scale: map[string]float64{"websocket_idle_kib": 28.4, "tls_handshake_cpu_us": 252, "tls_handshake_cpu_us_nginx": 168, "route_change_ms": 18}}
	b, _ := json.Marshal(res)
	os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644)
	os.WriteFile(filepath.Join(dir, "files.json"), []byte(`{"api_upload": 332, "sftp_upload": 166, "api_download": 343, "sftp_download": 157, "file_size_mib": 256}`), 0o644)
	out := filepath.Join(dir, "performance.md")
	at := time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)
	for range 2 { // replaced, not appended
		if err := writePerformance(dir, out, at, "Test CPU @ 2.0GHz"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(out)
	for _, want := range []string{
		"2026-12-02", "Test CPU @ 2.0GHz", "3 rounds",
		"| CPU per request | 110 µs [106–139] | 160 µs [135–163] | **0.69×** [0.65–1.03] |",
		"| p99 at 1000 req/s | 76 ms [22–87] | 81 ms [26–97] | **0.94×** [0.23–3.35] |",
		"| download | 101 MB/s [76–129] | 158 MB/s [139–368] | **0.64×** [0.21–0.93] |",
		"| CPU per request, against Caddy → `ssh -L` | 110 µs [106–139] | 314 µs [311–320] | **0.35×** [0.33–0.45] |",
		"| TLS handshake CPU | 252 µs | 168 µs | **1.50×** |",
		"| idle websocket | 28.4 KiB RSS | – | – |",
		"| files API upload, 256 MiB, local driver | 332 MB/s | 166 MB/s | **2.00×** |",
		"Not in this run: `files-qemu.json`, `autostart.json`.",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("performance.md lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(string(got), "# Performance"); n != 1 {
		t.Errorf("performance.md has %d titles, want 1 (replaced, not appended)", n)
	}
	if err := writePerformance(t.TempDir(), out, at, "x"); err == nil {
		t.Error("no results.json: want an error, got a page")
	}
}

// writePerformance reads the bench's figures in dir and writes the page to
// out, replacing it. results.json (the edge against its peers) is
// required; the other parts' files are used when present.
func writePerformance(dir, out string, at time.Time, cpu string) error {
	var res results
	if err := readJSON(filepath.Join(dir, "results.json"), &res); err != nil {
		return fmt.Errorf("the edge's figures: %w (make bench writes them)", err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Performance\n\nWritten by `make bench` on %s, on %s (%d CPUs, %s/%s), from its figures in `.bench/`;\n",
		at.UTC().Format("2006-01-02 15:04 MST"), cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&md, "each run replaces this page. Every figure is measured against a peer in the same run, interleaved,\n")
	fmt.Fprintf(&md, "as medians of %d rounds [min–max]; the ratio's range pairs each side's extremes. Read the ratios:\n", res.Rounds)
	fmt.Fprintf(&md, "absolute figures move with the machine. What each part measures, and the aims:\n[development.md](development.md#reading-make-bench).\n\n")

	paths := map[string]pathResult{}
	for _, p := range res.Paths {
		paths[p.Path] = p
	}
	edge, ng, cd := paths["edge"], paths["nginx-ssh"], paths["caddy-ssh"]
	fmt.Fprintf(&md, "## The edge against nginx → `ssh -L`\n\n| figure | edge | peer | edge ÷ peer |\n|---|---|---|---|\n")
	row := func(name, unit, format string, e, p float64, er, pr [2]float64) {
		if e == 0 || p == 0 {
			return
		}
		f := func(v float64) string { return fmt.Sprintf(format, v) }
		side := func(v float64, r [2]float64) string {
			if r == [2]float64{} {
				return f(v) + " " + unit
			}
			return fmt.Sprintf("%s %s [%s–%s]", f(v), unit, f(r[0]), f(r[1]))
		}
		ratio := fmt.Sprintf("**%.2f×**", e/p)
		if er != [2]float64{} && pr != [2]float64{} && pr[0] > 0 && pr[1] > 0 {
			ratio += fmt.Sprintf(" [%.2f–%.2f]", er[0]/pr[1], er[1]/pr[0])
		}
		fmt.Fprintf(&md, "| %s | %s | %s | %s |\n", name, side(e, er), side(p, pr), ratio)
	}
	row("CPU per request", "µs", "%.0f", edge.CPUPerReq, ng.CPUPerReq, edge.CPUPerReqRange, ng.CPUPerReqRange)
	rate := fmt.Sprintf("at %d req/s", edge.Rate)
	row("p99 "+rate, "ms", "%.0f", edge.P99, ng.P99, edge.P99Range, ng.P99Range)
	row("p99.9 "+rate, "ms", "%.0f", edge.P999, ng.P999, edge.P999Range, ng.P999Range)
	row("download", "MB/s", "%.0f", edge.MBps, ng.MBps, edge.MBpsRange, ng.MBpsRange)
	row("download CPU", "ms/MB", "%.2f", edge.CPUPerMB, ng.CPUPerMB, [2]float64{}, [2]float64{})
	row("upload", "MB/s", "%.0f", edge.UpMBps, ng.UpMBps, edge.UpMBpsRange, ng.UpMBpsRange)
	row("upload CPU", "ms/MB", "%.2f", edge.UpCPUPerMB, ng.UpCPUPerMB, [2]float64{}, [2]float64{})
	row("CPU per request, against Caddy → `ssh -L`", "µs", "%.0f", edge.CPUPerReq, cd.CPUPerReq, edge.CPUPerReqRange, cd.CPUPerReqRange)
	sc := res.Scale
	row("TLS handshake CPU", "µs", "%.0f", sc["tls_handshake_cpu_us"], sc["tls_handshake_cpu_us_nginx"], [2]float64{}, [2]float64{})
	row("TLS handshakes a second", "/s", "%.0f", sc["tls_handshakes_s"], sc["tls_handshakes_s_nginx"], [2]float64{}, [2]float64{})

	// The edge's scale figures have no peer: each is read against its aim.
	fmt.Fprintf(&md, "\n## The edge at scale (no peer: read against the aims)\n\n| figure | edge | peer | edge ÷ peer |\n|---|---|---|---|\n")
	for _, s := range []struct{ key, name, format string }{
		{"websocket_idle_kib", "idle websocket", "%.1f KiB RSS"},
		{"websocket_idle_heap_kib", "idle websocket, Go heap", "%.1f KiB"},
		{"tunnel_idle_kib", "idle tunnel", "%.1f KiB RSS"},
		{"tunnel_idle_heap_kib", "idle tunnel, Go heap", "%.1f KiB"},
		{"routes_100k_load_ms", "100,000-URL route table loaded", "%.0f ms"},
		{"routes_100k_heap_mib", "100,000-URL route table, Go heap", "%.1f MiB"},
		{"route_change_ms", "a change reaching that table (median)", "%.1f ms"},
	} {
		if v, ok := sc[s.key]; ok {
			fmt.Fprintf(&md, "| %s | %s | – | – |\n", s.name, fmt.Sprintf(s.format, v))
		}
	}

	var missing []string
	files := []struct{ file, what string }{{"files.json", "local driver"}, {"files-qemu.json", "test guest under QEMU"}}
	var fileRows strings.Builder
	for _, f := range files {
		var v map[string]float64
		if err := readJSON(filepath.Join(dir, f.file), &v); err != nil {
			missing = append(missing, "`"+f.file+"`")
			continue
		}
		for _, way := range []string{"upload", "download"} {
			a, p := v["api_"+way], v["sftp_"+way]
			if a > 0 && p > 0 {
				fmt.Fprintf(&fileRows, "| files API %s, %.0f MiB, %s | %.0f MB/s | %.0f MB/s | **%.2f×** |\n", way, v["file_size_mib"], f.what, a, p, a/p)
			}
		}
	}
	if fileRows.Len() > 0 {
		fmt.Fprintf(&md, "\n## Files: the API against OpenSSH's `sftp` (best of three)\n\n| figure | API | sftp | API ÷ sftp |\n|---|---|---|---|\n%s", fileRows.String())
	}

	var wakes []struct {
		Path                    string
		P50Ms, P99Ms, HoldP50Ms float64
		Wakes                   int
	}
	if err := readJSON(filepath.Join(dir, "autostart.json"), &wakes); err != nil {
		missing = append(missing, "`autostart.json`")
	} else if len(wakes) > 0 {
		fmt.Fprintf(&md, "\n## Auto-start: request to the app's first byte (no peer: read against the aims)\n\n| path | p50 | p99 | the edge's share, p50 | wakes |\n|---|---|---|---|---|\n")
		for _, w := range wakes {
			fmt.Fprintf(&md, "| %s | %.0f ms | %.0f ms | %.0f ms | %d |\n", w.Path, w.P50Ms, w.P99Ms, w.HoldP50Ms, w.Wakes)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&md, "\nNot in this run: %s.\n", strings.Join(missing, ", "))
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".new"
	if err := os.WriteFile(tmp, []byte(md.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s", path)
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// cpuModel names this machine's CPU, from /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "an unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "an unknown CPU"
}
