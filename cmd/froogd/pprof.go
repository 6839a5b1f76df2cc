//go:build pprof

package main

import (
	"net/http"
	_ "net/http/pprof" // on http.DefaultServeMux, served below
	"os"
)

// A build for profiling (go build -tags pprof) serves Go's profiles on
// $FROOG_PPROF_ADDR, for the benchmarks (FROOG_BENCH_PPROF). Release builds
// have no such listener.
func init() {
	if addr := os.Getenv("FROOG_PPROF_ADDR"); addr != "" {
		go http.ListenAndServe(addr, nil)
	}
}
