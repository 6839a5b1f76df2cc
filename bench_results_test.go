package froog_test

// The figures make bench's parts write to .bench/, and their tables: read
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
	Path            string        `json:"path"`
	Chain           string        `json:"chain,omitempty"` // what a request goes through
	Peer            bool          `json:"peer,omitempty"`  // a peer the edge is measured against
	Small           []smallResult `json:"small,omitempty"` // one a fixed rate
	MBps            float64       `json:"mb_s"`            // 128 MiB download
	MBpsRange       [2]float64    `json:"mb_s_range"`
	CPUPerMB        float64       `json:"cpu_ms_per_mb"`
	CPUPerMBRange   [2]float64    `json:"cpu_ms_per_mb_range"`
	UpMBps          float64       `json:"upload_mb_s"`
	UpMBpsRange     [2]float64    `json:"upload_mb_s_range"`
	UpCPUPerMB      float64       `json:"upload_cpu_ms_per_mb"`
	UpCPUPerMBRange [2]float64    `json:"upload_cpu_ms_per_mb_range"`
}

// smallResult is a stack's small GETs at one fixed offered rate.
type smallResult struct {
	Rate           int        `json:"rate"` // offered requests a second
	RPS            float64    `json:"rps"`  // answered a second at that rate
	P50            float64    `json:"p50_ms"`
	P99            float64    `json:"p99_ms"`
	P99Range       [2]float64 `json:"p99_ms_range"`
	P999           float64    `json:"p999_ms"`
	P999Range      [2]float64 `json:"p999_ms_range"`
	CPUPerReq      float64    `json:"cpu_us_per_req"`
	CPUPerReqRange [2]float64 `json:"cpu_us_per_req_range"`
}

// at is the stack's small-request figures at rate (zero when it has none).
func (p pathResult) at(rate int) smallResult {
	for _, s := range p.Small {
		if s.Rate == rate {
			return s
		}
	}
	return smallResult{}
}

type results struct {
	Rounds int                `json:"rounds"`
	Rates  []int              `json:"rates"`
	Paths  []pathResult       `json:"paths"`
	Scale  map[string]float64 `json:"scale"`
}

// figure reads one figure, with its range, from a stack's results.
type figure func(pathResult) (float64, [2]float64)

// best is the peer with the best value of f among those that have it: the
// lowest, or the highest when higher is better.
func (r results) best(f figure, higher bool) (pathResult, bool) {
	var b pathResult
	var bv float64
	for _, p := range r.Paths {
		v, _ := f(p)
		if !p.Peer || v == 0 {
			continue
		}
		if bv == 0 || (higher && v > bv) || (!higher && v < bv) {
			b, bv = p, v
		}
	}
	return b, bv != 0
}

func (r results) path(name string) pathResult {
	for _, p := range r.Paths {
		if p.Path == name {
			return p
		}
	}
	return pathResult{}
}

// value is "v unit [min–max]", or without the range when there is none.
func value(format, unit string, v float64, r [2]float64) string {
	return fmt.Sprintf(format, v) + " " + unit + rangeOf(format, r)
}

// ranged is "v [min–max]", or v alone when there is no range.
func ranged(format string, v float64, r [2]float64) string {
	return fmt.Sprintf(format, v) + rangeOf(format, r)
}

func rangeOf(format string, r [2]float64) string {
	if r == [2]float64{} {
		return ""
	}
	return fmt.Sprintf(" [%s–%s]", fmt.Sprintf(format, r[0]), fmt.Sprintf(format, r[1]))
}

// ratio is e ÷ p in bold, and its range pairing each side's extremes.
func ratio(e, p float64, er, pr [2]float64) string {
	s := fmt.Sprintf("**%.2f×**", e/p)
	if er != [2]float64{} && pr[0] > 0 && pr[1] > 0 {
		s += fmt.Sprintf(" [%.2f–%.2f]", er[0]/pr[1], er[1]/pr[0])
	}
	return s
}

// againstBest is the table of the edge's figures against the best peer's,
// one row a figure, naming that peer.
func (r results) againstBest() string {
	var md strings.Builder
	fmt.Fprintf(&md, "| figure | edge | best peer | edge ÷ best peer |\n|---|---|---|---|\n")
	edge := r.path("edge")
	row := func(name, format, unit string, f figure, higher bool) {
		e, er := f(edge)
		b, ok := r.best(f, higher)
		if e == 0 || !ok {
			return
		}
		p, pr := f(b)
		fmt.Fprintf(&md, "| %s | %s | %s: %s | %s |\n", name, value(format, unit, e, er), b.Path, value(format, unit, p, pr), ratio(e, p, er, pr))
	}
	for _, rate := range r.Rates {
		at := fmt.Sprintf(" at %d req/s", rate)
		row("CPU per request"+at, "%.0f", "µs", func(p pathResult) (float64, [2]float64) { s := p.at(rate); return s.CPUPerReq, s.CPUPerReqRange }, false)
		row("p99"+at, "%.1f", "ms", func(p pathResult) (float64, [2]float64) { s := p.at(rate); return s.P99, s.P99Range }, false)
		row("p99.9"+at, "%.1f", "ms", func(p pathResult) (float64, [2]float64) { s := p.at(rate); return s.P999, s.P999Range }, false)
	}
	// HTTP/3 against the edge's own HTTP/2, in the same run.
	h2, h3 := r.path("edge-h2"), r.path("edge-h3")
	for _, rate := range r.Rates {
		for _, f := range []struct {
			name, format, unit string
			v                  func(smallResult) (float64, [2]float64)
		}{
			{"HTTP/3 CPU per request", "%.0f", "µs", func(s smallResult) (float64, [2]float64) { return s.CPUPerReq, s.CPUPerReqRange }},
			{"HTTP/3 p99", "%.1f", "ms", func(s smallResult) (float64, [2]float64) { return s.P99, s.P99Range }},
		} {
			e, er := f.v(h3.at(rate))
			p, pr := f.v(h2.at(rate))
			if e != 0 && p != 0 {
				fmt.Fprintf(&md, "| %s at %d req/s | %s | edge-h2: %s | %s |\n", f.name, rate, value(f.format, f.unit, e, er), value(f.format, f.unit, p, pr), ratio(e, p, er, pr))
			}
		}
	}
	row("download", "%.0f", "MB/s", func(p pathResult) (float64, [2]float64) { return p.MBps, p.MBpsRange }, true)
	row("download CPU", "%.2f", "ms/MB", func(p pathResult) (float64, [2]float64) { return p.CPUPerMB, p.CPUPerMBRange }, false)
	row("upload", "%.0f", "MB/s", func(p pathResult) (float64, [2]float64) { return p.UpMBps, p.UpMBpsRange }, true)
	row("upload CPU", "%.2f", "ms/MB", func(p pathResult) (float64, [2]float64) { return p.UpCPUPerMB, p.UpCPUPerMBRange }, false)
	// TLS handshakes, full and resumed: the scale part measures the edge
	// against the peers that terminate TLS themselves (nginx, and frp's
	// frpc).
	hs := func(name, key, format, unit string, higher bool) {
		e := r.Scale[key]
		bn, bv := "", 0.0
		for _, peer := range []string{"nginx", "frp"} {
			v := r.Scale[key+"_"+peer]
			if v != 0 && (bv == 0 || (higher && v > bv) || (!higher && v < bv)) {
				bn, bv = peer, v
			}
		}
		if e != 0 && bv != 0 {
			fmt.Fprintf(&md, "| %s | %s | %s: %s | %s |\n", name, value(format, unit, e, [2]float64{}), bn, value(format, unit, bv, [2]float64{}), ratio(e, bv, [2]float64{}, [2]float64{}))
		}
	}
	hs("TLS handshake CPU", "tls_handshake_cpu_us", "%.0f", "µs", false)
	hs("TLS resumed handshake CPU", "tls_resumed_cpu_us", "%.0f", "µs", false)
	hs("TLS handshakes a second", "tls_handshakes_s", "%.0f", "/s", true)
	return md.String()
}

// stacks is the table of every stack's own figures and what it is. A
// stack that answers fewer than the offered rate is saturated: its p99 is
// then the queue the open-loop schedule built up.
func (r results) stacks() string {
	var md strings.Builder
	fmt.Fprintf(&md, "| stack | chain (CPU counted: the processes in bold) |")
	for _, rate := range r.Rates {
		fmt.Fprintf(&md, " at %d/s: CPU µs/req, p99 ms, answered/s |", rate)
	}
	fmt.Fprintf(&md, " down MB/s, ms/MB | up MB/s, ms/MB |\n|---|---|%s---|---|\n", strings.Repeat("---|", len(r.Rates)))
	for _, p := range r.Paths {
		fmt.Fprintf(&md, "| %s | %s |", p.Path, p.Chain)
		for _, rate := range r.Rates {
			if s := p.at(rate); s.Rate != 0 {
				fmt.Fprintf(&md, " %s, %s, %.0f |", ranged("%.0f", s.CPUPerReq, s.CPUPerReqRange), ranged("%.1f", s.P99, s.P99Range), s.RPS)
			} else {
				fmt.Fprintf(&md, " – |")
			}
		}
		for _, b := range [][2]float64{{p.MBps, p.CPUPerMB}, {p.UpMBps, p.UpCPUPerMB}} {
			if b[0] != 0 {
				fmt.Fprintf(&md, " %.0f, %.2f |", b[0], b[1])
			} else {
				fmt.Fprintf(&md, " – |")
			}
		}
		md.WriteString("\n")
	}
	return md.String()
}

// markdown is results.md: both tables and the scale figures as they are.
func (r results) markdown() string {
	var md strings.Builder
	fmt.Fprintf(&md, "Medians of %d rounds [min–max]; small GETs over HTTPS keep-alive at fixed rates, latency from the intended send time.\n\n", r.Rounds)
	fmt.Fprintf(&md, "%s\n%s", r.againstBest(), r.stacks())
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
