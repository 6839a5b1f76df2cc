package froog_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
		{"sandboxio", "net/http"},
		{"sandboxio", "froog.tech/froog/api"},
		{"wake", "net/http"},
		{"wake", "froog.tech/froog/api"},
		{"wake", "froog.tech/froog/edge"},
		{"wake", "froog.tech/froog/edge/route"},
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
		"names":       nil,
		"guest":       nil,
		"desktop/rfb": nil,
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
	// The host grammar knows nothing of HTTP either.
	if slices.Contains(deps["names"], "net/http") {
		t.Errorf("names imports net/http")
	}
}

// No production Go file is over 800 lines (STYLE.md: at 800, split it by
// concern). Generated files are exempt: froog/api.gen.go and
// models.gen.go, the OpenAPI client and its types, are the ones there are.
func TestNoLongFiles(t *testing.T) {
	const max = 800
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated.Match(b) {
			return nil
		}
		if n := bytes.Count(b, []byte("\n")); n > max {
			t.Errorf("%s has %d lines, over %d: split it by concern", path, n, max)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// generated matches the header the Go tools recognise as generated code.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// docFile is a file name in a doc comment: a word ending in .go, not part
// of a path into another package; "files*.go" names every file it
// matches.
var docFile = regexp.MustCompile(`(?:^|[^\w/*.-])([\w*-]+(?:\.[\w*-]+)*\.go)\b`)

// A package's doc.go that names its files names all of them: every
// non-test .go file of the package is named there, and every file named
// there exists.
func TestDocFileLists(t *testing.T) {
	docs, err := filepath.Glob("*/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("*/*/doc.go")
	deeper, _ := filepath.Glob("*/*/*/doc.go")
	for _, doc := range append(append(docs, more...), deeper...) {
		dir := filepath.Dir(doc)
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		// A test file named is one of the package's or the module root's
		// (arch_test.go); only production files make a list.
		var named []string
		for _, m := range docFile.FindAllSubmatch(b, -1) {
			n := string(m[1])
			if !strings.HasSuffix(n, "_test.go") {
				named = append(named, n)
				continue
			}
			here, _ := filepath.Glob(filepath.Join(dir, n))
			root, _ := filepath.Glob(n)
			if len(here) == 0 && len(root) == 0 {
				t.Errorf("%s names %s, which is not a test file of the package or the module root", doc, n)
			}
		}
		if len(named) == 0 {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var have []string
		for _, f := range files {
			if f := filepath.Base(f); !strings.HasSuffix(f, "_test.go") && f != "doc.go" {
				have = append(have, f)
			}
		}
		for _, n := range named {
			if !slices.ContainsFunc(have, func(f string) bool { ok, _ := filepath.Match(n, f); return ok }) {
				t.Errorf("%s names %s, which is not a file of the package", doc, n)
			}
		}
		for _, f := range have {
			if !slices.ContainsFunc(named, func(n string) bool { ok, _ := filepath.Match(n, f); return ok }) {
				t.Errorf("%s names files but not %s", doc, f)
			}
		}
	}
}
