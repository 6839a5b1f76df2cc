package froog_test

// The figures make bench's parts write to .bench/, and their table: read
// by TestEdgeBench (build tag bench) and by the report's writer, which
// TestPerformanceMarkdown checks in every go test (no tag).

import (
	"fmt"
	"slices"
	"strings"
)

// pathResult is one stack's figures, medians over the rounds; the ranges
// are [min, max] over the rounds.
type pathResult struct {
	Path           string     `json:"path"`
	Rate           int        `json:"rate,omitempty"` // offered requests a second
	RPS            float64    `json:"rps"`            // answered a second at that rate
	P50            float64    `json:"p50_ms"`
	P99            float64    `json:"p99_ms"`
	P99Range       [2]float64 `json:"p99_ms_range"`
	P999           float64    `json:"p999_ms"`
	P999Range      [2]float64 `json:"p999_ms_range"`
	CPUPerReq      float64    `json:"cpu_us_per_req"`
	CPUPerReqRange [2]float64 `json:"cpu_us_per_req_range"`
	MBps           float64    `json:"mb_s"` // 256 MiB download
	MBpsRange      [2]float64 `json:"mb_s_range"`
	CPUPerMB       float64    `json:"cpu_ms_per_mb"`
	UpMBps         float64    `json:"upload_mb_s"`
	UpMBpsRange    [2]float64 `json:"upload_mb_s_range"`
	UpCPUPerMB     float64    `json:"upload_cpu_ms_per_mb"`
}

type results struct {
	Rounds int                `json:"rounds"`
	Paths  []pathResult       `json:"paths"`
	Scale  map[string]float64 `json:"scale"`
}

func (r results) markdown() string {
	var md strings.Builder
	byName := map[string]pathResult{}
	for _, p := range r.Paths {
		byName[p.Path] = p
	}
	x := func(v, b float64) string {
		if v == 0 || b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", v/b)
	}
	ng, cd := byName["nginx-ssh"], byName["caddy-ssh"]
	if len(r.Paths) == 0 {
		r.Paths = []pathResult{{}}
	}
	fmt.Fprintf(&md, "Small GETs at a fixed %d req/s (HTTPS keep-alive; latency from the intended send time), medians of %d rounds [min–max]:\n\n", r.Paths[0].Rate, r.Rounds)
	fmt.Fprintf(&md, "| path | CPU µs/req | × nginx-ssh | × caddy-ssh | p50 ms | p99 ms | × nginx-ssh | p99.9 ms | × nginx-ssh |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Paths {
		if p.Rate == 0 {
			continue
		}
		fmt.Fprintf(&md, "| %s | %.1f [%.1f–%.1f] | %s | %s | %.2f | %.2f [%.2f–%.2f] | %s | %.2f [%.2f–%.2f] | %s |\n", p.Path,
			p.CPUPerReq, p.CPUPerReqRange[0], p.CPUPerReqRange[1], x(p.CPUPerReq, ng.CPUPerReq), x(p.CPUPerReq, cd.CPUPerReq),
			p.P50, p.P99, p.P99Range[0], p.P99Range[1], x(p.P99, ng.P99), p.P999, p.P999Range[0], p.P999Range[1], x(p.P999, ng.P999))
	}
	fmt.Fprintf(&md, "\nBulk, 256 MiB (CPU of the proxying processes per MB):\n\n")
	fmt.Fprintf(&md, "| path | down MB/s | × nginx-ssh | down CPU ms/MB | × nginx-ssh | up MB/s | × nginx-ssh | up CPU ms/MB | × nginx-ssh |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Paths {
		if p.MBps == 0 {
			continue
		}
		fmt.Fprintf(&md, "| %s | %.0f [%.0f–%.0f] | %s | %.2f | %s | %.0f [%.0f–%.0f] | %s | %.2f | %s |\n", p.Path,
			p.MBps, p.MBpsRange[0], p.MBpsRange[1], x(p.MBps, ng.MBps), p.CPUPerMB, x(p.CPUPerMB, ng.CPUPerMB),
			p.UpMBps, p.UpMBpsRange[0], p.UpMBpsRange[1], x(p.UpMBps, ng.UpMBps), p.UpCPUPerMB, x(p.UpCPUPerMB, ng.UpCPUPerMB))
	}
	fmt.Fprintf(&md, "\nScale (the edge):\n\n| figure | value |\n|---|---|\n")
	keys := make([]string, 0, len(r.Scale))
	for k := range r.Scale {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&md, "| %s | %.2f |\n", k, r.Scale[k])
	}
	return md.String()
}
