// Package version says which build of froogd is running: the version and
// commit the Makefile stamps into the binary (-ldflags "-X
// froog.tech/froog/internal/version.stamped=VERSION -X
// ….revision=COMMIT"), else what Go recorded in it (the module's version,
// the commit when built with VCS stamping), and the build-info metric
// every role exports.
package version

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// stamped and revision are set at link time; empty in a plain go build.
var stamped, revision string

// Info is one build's identity.
type Info struct {
	Version   string // the release's version, or "devel"
	Revision  string // the commit, with "-modified" when the tree had changes; "unknown" without VCS data
	GoVersion string
}

// Get reads the running binary's identity.
func Get() Info {
	i := Info{Version: stamped, Revision: revision}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		i.GoVersion = bi.GoVersion
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if revision == "" {
					i.Revision = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && i.Revision != "unknown" {
			i.Revision += "-modified"
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	return i
}

// String is the line `froogd version` prints.
func (i Info) String() string {
	return "froogd " + i.Version + " (revision " + i.Revision + ", " + i.GoVersion + ")"
}

// Collector is the froog_build_info gauge: 1, labelled with the build's
// version, revision and Go version and the role the process runs, so a
// dashboard sees which build each process is during a rolling upgrade.
func Collector(role string) prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "froog_build_info",
		Help:        "Which build of froogd this process is (always 1).",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion, "role": role},
	})
	g.Set(1)
	return g
}
