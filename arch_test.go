package froog_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import rules of DESIGN.md: the store knows nothing of HTTP, the API
// never reaches into the edge, hostctl or certs, and the edge never into
// the API. cmd/froogd is the only place that wires them together.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// Rules about froog's own packages hold for everything a package pulls
	// in; "knows nothing of HTTP" is about its own imports (a metrics
	// library may use net/http underneath).
	deps, imports := map[string][]string{}, map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath    string
			Imports, Deps []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, "froog.tech/froog/")
		deps[name], imports[name] = p.Deps, p.Imports
	}
	rules := []struct{ pkg, forbidden string }{
		{"store", "net/http"},
		{"store/pg", "net/http"},
		{"store/embedded", "net/http"},
		{"api", "froog.tech/froog/edge"},
		{"api", "froog.tech/froog/hostctl"},
		{"api", "froog.tech/froog/certs"},
		{"edge", "froog.tech/froog/api"},
		{"edge/route", "net/http"},
		{"edge/route", "froog.tech/froog/edge"},
		{"edge/route", "froog.tech/froog/api"},
		{"edge/route", "froog.tech/froog/certs"},
		{"certs", "froog.tech/froog/edge"},
		{"tunnel", "net/http"},
		{"hostctl", "net/http"},
		{"hostctl/local", "net/http"},
		{"hostctl", "froog.tech/froog/edge"},
		{"hostctl", "froog.tech/froog/api"},
		{"desktop", "froog.tech/froog/edge"},
		{"desktop", "froog.tech/froog/api"},
	}
	for _, r := range rules {
		d, ok := deps[r.pkg]
		if !strings.HasPrefix(r.forbidden, "froog.tech/") {
			d, ok = imports[r.pkg]
		}
		if !ok {
			t.Errorf("package %s not found", r.pkg)
			continue
		}
		for _, dep := range d {
			if dep == r.forbidden {
				t.Errorf("%s imports %s", r.pkg, r.forbidden)
			}
		}
	}
}

// The shipped binary does not link package testing (nor testing/...):
// test helpers live in packages of their own (store/storetest,
// store/pg/pgtest) that only tests import.
func TestBinaryLinksNoTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/froogd").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/froogd: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "froog.tech/froog/cmd/froogd" {
		t.Fatalf("go list -deps ./cmd/froogd: got %d packages, last %q, want froog.tech/froog/cmd/froogd last", len(deps), deps[len(deps)-1:])
	}
	for _, dep := range deps {
		if dep == "testing" || strings.HasPrefix(dep, "testing/") {
			t.Errorf("cmd/froogd links %s; find who imports it with go list -deps -f '{{.ImportPath}} {{.Imports}}' ./cmd/froogd", dep)
		}
	}
}

// Leaf packages: the host grammar, the in-guest program and the RFB
// protocol import nothing of froog's (the guest runs inside sandboxes;
// the other two are read by server packages and must not pull one in),
// except the few froog packages listed for each.
func TestImportRulesLeaves(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[strings.TrimPrefix(f[0], "froog.tech/froog/")] = f[1:]
	}
	leaves := map[string][]string{
		"names": nil,
		"guest": nil,
	}
	for pkg, allowed := range leaves {
		d, ok := deps[pkg]
		if !ok {
			t.Errorf("package %s not found", pkg)
			continue
		}
		for _, dep := range d {
			name, ours := strings.CutPrefix(dep, "froog.tech/froog/")
			if ours && !slices.Contains(allowed, name) {
				t.Errorf("%s imports %s; it may import of froog's only %v", pkg, dep, allowed)
			}
		}
	}
}
