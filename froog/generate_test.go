package froog

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// api.gen.go is what make generate makes from api/openapi.json now: the
// generator runs into a temporary folder and the outputs must match, so
// a changed document without make generate fails make test.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "api.gen.go")
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The configuration names the output; -o does not override it.
	cfg = bytes.Replace(cfg, []byte("\noutput: api.gen.go\n"), []byte("\noutput: "+tmp+"\n"), 1)
	if err := os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "oapi-codegen.yaml"), "../api/openapi.json")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, out)
	}
	want, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("api.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("froog/api.gen.go is not what api/openapi.json generates (%d bytes, want %d): run make generate", len(got), len(want))
	}
}
