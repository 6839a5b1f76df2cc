package froog_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// The import rules of DESIGN.md: the store knows nothing of HTTP, the API
// never reaches into the edge, hostctl or certs, and the edge never into
// the API. cmd/froogd is the only place that wires them together.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		deps[strings.TrimPrefix(p.ImportPath, "froog.tech/froog/")] = p.Deps
	}
	rules := []struct{ pkg, forbidden string }{
		{"store", "net/http"},
		{"store/pg", "net/http"},
		{"store/embedded", "net/http"},
		{"api", "froog.tech/froog/edge"},
		{"api", "froog.tech/froog/hostctl"},
		{"api", "froog.tech/froog/certs"},
		{"edge", "froog.tech/froog/api"},
		{"tunnel", "net/http"},
		{"hostctl", "froog.tech/froog/api"},
	}
	for _, r := range rules {
		d, ok := deps[r.pkg]
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
