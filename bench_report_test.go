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
	"slices"
	"strconv"
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
	res := results{Rounds: 3, Rates: []int{1000, 5000}, Paths: []pathResult{
		{Path: "direct", Chain: "the upstream", Small: []smallResult{{Rate: 1000, P50: 0.6, P99: 4}}},
		{Path: "edge", Chain: "**edge** → sshd", Small: []smallResult{
			{Rate: 1000, P50: 1.1, P99: 76, P99Range: [2]float64{22, 87}, P999: 111, P999Range: [2]float64{44, 125}, CPUPerReq: 110, CPUPerReqRange: [2]float64{106, 139}},
			{Rate: 5000, P99: 9, P99Range: [2]float64{8, 12}, CPUPerReq: 90, CPUPerReqRange: [2]float64{85, 95}}},
			MBps: 101, MBpsRange: [2]float64{76, 129}, CPUPerMB: 3.65, CPUPerMBRange: [2]float64{3.5, 3.8},
			UpMBps: 86, UpMBpsRange: [2]float64{73, 105}, UpCPUPerMB: 1.9},
		{Path: "nginx-ssh", Peer: true, Small: []smallResult{
			{Rate: 1000, P50: 1.5, P99: 81, P99Range: [2]float64{26, 97}, P999: 148, P999Range: [2]float64{40, 149}, CPUPerReq: 160, CPUPerReqRange: [2]float64{135, 163}},
			{Rate: 5000, P99: 10, P99Range: [2]float64{9, 11}, CPUPerReq: 150, CPUPerReqRange: [2]float64{140, 170}}},
			MBps: 158, MBpsRange: [2]float64{139, 368}, CPUPerMB: 2.09, UpMBps: 178, UpMBpsRange: [2]float64{177, 182}, UpCPUPerMB: 2.61},
		{Path: "frp", Chain: "**frps** → **frpc**", Peer: true, Small: []smallResult{
			{Rate: 1000, P99: 22, P99Range: [2]float64{7, 66}, CPUPerReq: 314, CPUPerReqRange: [2]float64{311, 320}},
			{Rate: 5000, RPS: 2500, P99: 30, CPUPerReq: 120, CPUPerReqRange: [2]float64{100, 130}}},
			MBps: 200, MBpsRange: [2]float64{190, 210}, CPUPerMB: 2.5, UpMBps: 100, UpCPUPerMB: 1.5, UpCPUPerMBRange: [2]float64{1.4, 1.6}},
		{Path: "ssh-l", MBps: 900, CPUPerMB: 0.5},
	}, Scale: map[string]float64{"websocket_idle_kib": 28.4, "tls_handshake_cpu_us": 252, "tls_handshake_cpu_us_nginx": 168,
		"tls_handshake_cpu_us_frp": 300, "tls_resumed_cpu_us": 400, "tls_resumed_cpu_us_nginx": 190, "tls_resumed_cpu_us_frp": 160,
		"route_change_ms": 18}}
	b, _ := json.Marshal(res)
	os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644)
	os.WriteFile(filepath.Join(dir, "files.json"), []byte(`{"api_upload": 332, "sftp_upload": 166, "api_download": 343, "sftp_download": 157, "file_size_mib": 256}`), 0o644)
	os.WriteFile(filepath.Join(dir, "sound.json"), []byte(`{"latency_ms_median": 44.2, "latency_ms_range": [32.1, 70.4], "latency_bursts": 15, "page_lead_ms": 60, `+
		`"froogd_cores_per_listener": 0.0006, "encoder_cores": 0.046, "rounds": [{"listeners": 1, "froogd_cpu_cores": 0.017}, {"listeners": 50, "froogd_cpu_cores": 0.049}]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "inbox.json"), []byte(`{"webhooks": 960, "senders": 8, "accepted_per_s": 268.4, "p50_ms": 28.1, "p99_ms": 54.03, "max_ms": 72, "delivered_per_s": 163}`), 0o644)
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
		"| CPU per request at 1000 req/s | 110 µs [106–139] | nginx-ssh: 160 µs [135–163] | **0.69×** [0.65–1.03] |",
		"| p99 at 1000 req/s | 76.0 ms [22.0–87.0] | frp: 22.0 ms [7.0–66.0] | **3.45×** [0.33–12.43] |",
		"| CPU per request at 5000 req/s | 90 µs [85–95] | frp: 120 µs [100–130] | **0.75×** [0.65–0.95] |",
		"| download | 101 MB/s [76–129] | frp: 200 MB/s [190–210] | **0.51×** [0.36–0.68] |",
		"| download CPU | 3.65 ms/MB [3.50–3.80] | nginx-ssh: 2.09 ms/MB | **1.75×** |",
		"| upload CPU | 1.90 ms/MB | frp: 1.50 ms/MB [1.40–1.60] | **1.27×** |",
		"| TLS handshake CPU | 252 µs | nginx: 168 µs | **1.50×** |",
		"| TLS resumed handshake CPU | 400 µs | frp: 160 µs | **2.50×** |",
		"| frp | **frps** → **frpc** | 314 [311–320], 22.0 [7.0–66.0], 0 | 120 [100–130], 30.0, 2500 | 200, 2.50 | 100, 1.50 |",
		"| ssh-l |  | – | – | 900, 0.50 | – |",
		"| direct | the upstream | 0, 4.0, 0 | – | – | – |",
		"| idle websocket | 28.4 KiB RSS | – | – |",
		"| CPU per request at 5000 req/s, against serving a tiny HTTPS response | 90 µs | published best: ≈14 µs | **6.4×** |",
		"| files API upload, 256 MiB, local driver | 332 MB/s | 166 MB/s | **2.00×** |",
		"Webhook inbox on Postgres: 960 signed webhooks to one URL from 8 senders",
		"| 268 | 28.1 ms | 54.0 ms | 72.0 ms | 163 |",
		"| guest → page, decoded | 44 ms [32–70], median of 15 bursts |",
		"| froogd CPU, 1 / 50 listeners | 1.7 / 4.9 % of a core |",
		"| froogd CPU per added listener | 0.06 % of a core |",
		"Not in this run: `files-qemu.json`, `autostart.json`.",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("performance.md lacks %q:\n%s", want, got)
		}
	}
	// results.md, the bench's own summary, has the same two tables and
	// every scale figure.
	if md := res.markdown(); !strings.Contains(md, "| CPU per request at 1000 req/s | 110 µs [106–139] | nginx-ssh: 160 µs [135–163] |") ||
		!strings.Contains(md, "| ssh-l |  | – | – | 900, 0.50 | – |") || !strings.Contains(md, "| tls_handshake_cpu_us_frp | 300.00 |") {
		t.Errorf("results.md lacks a table or a figure:\n%s", md)
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
// tinyHTTPSMicros is the published best CPU for serving a tiny HTTPS
// response, µs a request on one core: the limit the edge's own figure is
// read against.
const tinyHTTPSMicros = 14

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

	fmt.Fprintf(&md, "## The edge against the best peer\n\nFor each figure, the peer that did best at it in this run (the stacks are below).\n\n%s", res.againstBest())
	fmt.Fprintf(&md, "\n## The stacks\n\nEvery stack reaches the same upstream (nginx serving a small page and a 128 MiB file; a Go sink for\nuploads) on the same machine; the CPU counted is that of the processes in bold, over the measured part.\nA stack answering fewer requests a second than offered is saturated, and its p99 is the queue it built.\n\n%s", res.stacks())
	sc := res.Scale

	// The edge's scale figures have no peer: each is read against its aim.
	fmt.Fprintf(&md, "\n## The edge at scale (no peer: read against the aims)\n\n| figure | edge | peer | edge ÷ peer |\n|---|---|---|---|\n")
	// How far from the limit: the edge's own CPU per small request at the
	// highest rate measured, against the published best for serving a
	// tiny HTTPS response on one core (tinyHTTPSMicros). The edge also
	// carries each request over SSH to a sandbox.
	if e := res.path("edge"); len(res.Rates) > 0 {
		top := slices.Max(res.Rates)
		if c := e.at(top).CPUPerReq; c > 0 {
			fmt.Fprintf(&md, "| CPU per request at %d req/s, against serving a tiny HTTPS response | %.0f µs | published best: ≈%d µs | **%.1f×** |\n", top, c, tinyHTTPSMicros, c/tinyHTTPSMicros)
		}
	}
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
	var inbox struct {
		Webhooks      int     `json:"webhooks"`
		Senders       int     `json:"senders"`
		AcceptedPerS  float64 `json:"accepted_per_s"`
		P50Ms         float64 `json:"p50_ms"`
		P99Ms         float64 `json:"p99_ms"`
		MaxMs         float64 `json:"max_ms"`
		DeliveredPerS float64 `json:"delivered_per_s"`
	}
	if err := readJSON(filepath.Join(dir, "inbox.json"), &inbox); err != nil {
		missing = append(missing, "`inbox.json`")
	} else {
		fmt.Fprintf(&md, "\n## Webhook inbox on Postgres: %d signed webhooks to one URL from %d senders over HTTP/2 (no peer: read against the aims)\n\n", inbox.Webhooks, inbox.Senders)
		fmt.Fprintf(&md, "| accepted a second | 202 p50 | 202 p99 | 202 max | delivered a second |\n|---|---|---|---|---|\n")
		fmt.Fprintf(&md, "| %.0f | %.1f ms | %.1f ms | %.1f ms | %.0f |\n", inbox.AcceptedPerS, inbox.P50Ms, inbox.P99Ms, inbox.MaxMs, inbox.DeliveredPerS)
	}
	var sound struct {
		LatencyMs    float64    `json:"latency_ms_median"`
		LatencyRange [2]float64 `json:"latency_ms_range"`
		Bursts       int        `json:"latency_bursts"`
		LeadMs       float64    `json:"page_lead_ms"`
		PerListener  float64    `json:"froogd_cores_per_listener"`
		EncoderCores float64    `json:"encoder_cores"`
		Rounds       []struct {
			Listeners int     `json:"listeners"`
			Cores     float64 `json:"froogd_cpu_cores"`
		} `json:"rounds"`
	}
	if err := readJSON(filepath.Join(dir, "sound.json"), &sound); err != nil {
		missing = append(missing, "`sound.json`")
	} else {
		var ns, cs []string
		for _, r := range sound.Rounds {
			ns, cs = append(ns, strconv.Itoa(r.Listeners)), append(cs, fmt.Sprintf("%.1f", 100*r.Cores))
		}
		fmt.Fprintf(&md, "\n## Desktop sound: Opus from the guest's sink to the page (no peer: read against the aims)\n\n| figure | measured |\n|---|---|\n")
		fmt.Fprintf(&md, "| guest → page, decoded | %.0f ms [%.0f–%.0f], median of %d bursts |\n", sound.LatencyMs, sound.LatencyRange[0], sound.LatencyRange[1], sound.Bursts)
		fmt.Fprintf(&md, "| then played by the page | %.0f ms later, plus its output's latency |\n", sound.LeadMs)
		fmt.Fprintf(&md, "| froogd CPU, %s listeners | %s %% of a core |\n", strings.Join(ns, " / "), strings.Join(cs, " / "))
		fmt.Fprintf(&md, "| froogd CPU per added listener | %.2f %% of a core |\n", 100*sound.PerListener)
		fmt.Fprintf(&md, "| the sandbox's encoder, one whatever the listeners | %.1f %% of a core |\n", 100*sound.EncoderCores)
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
