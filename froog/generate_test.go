package froog

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// api.gen.go and models.gen.go are what make generate makes from
// api/openapi.json now: each configuration's generator runs into a
// temporary folder and the outputs must match, so a changed document
// without make generate fails make test.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	for cfgFile, out := range map[string]string{"oapi-codegen.yaml": "api.gen.go", "oapi-codegen-models.yaml": "models.gen.go"} {
		t.Run(out, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tmp := filepath.Join(dir, out)
			cfg, err := os.ReadFile(cfgFile)
			if err != nil {
				t.Fatal(err)
			}
			// The configuration names the output; -o does not override it.
			named := []byte("\noutput: " + out + "\n")
			if !bytes.Contains(cfg, named) {
				t.Fatalf("%s does not name its output %s", cfgFile, out)
			}
			cfg = bytes.Replace(cfg, named, []byte("\noutput: "+tmp+"\n"), 1)
			if err := os.WriteFile(filepath.Join(dir, cfgFile), cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, cfgFile), "../api/openapi.json")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("oapi-codegen: %v\n%s", err, out)
			}
			want, err := os.ReadFile(tmp)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("froog/%s is not what api/openapi.json generates (%d bytes, want %d): run make generate", out, len(got), len(want))
			}
		})
	}
}
