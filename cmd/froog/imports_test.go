package main_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The CLI makes no HTTP call of its own (every one is the SDK's generated
// code), and the SDK imports nothing else of froog's, so it can be used,
// or copied, on its own.
func TestImports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dir       string
		forbidden func(string) bool
		why       string
	}{
		{".", func(p string) bool { return p == "net/http" || p == "net/url" }, "the CLI calls the API only through the SDK"},
		{"../../froog", func(p string) bool { return strings.HasPrefix(p, "froog.tech/") }, "the SDK stands alone"},
	} {
		files, err := filepath.Glob(filepath.Join(tc.dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", tc.dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); tc.forbidden(p) {
					t.Errorf("%s imports %s: %s", f, p, tc.why)
				}
			}
		}
	}
}
