package testdep

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Run in a child test binary, the outcome of Need for a missing program
// with and without CI: a skip locally, a failure under CI.
func TestNeedFailsUnderCI(t *testing.T) {
	if os.Getenv("TESTDEP_CHILD") == "1" {
		Need(t, "froog-no-such-program")
		t.Fatal("Need returned for a program that is not installed")
	}
	tests := []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP"},
		{"false", false, "--- SKIP"},
		{"true", true, "--- FAIL"},
	}
	for _, tt := range tests {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestNeedFailsUnderCI$", "-test.v")
			cmd.Env = append(os.Environ(), "TESTDEP_CHILD=1", "CI="+tt.ci)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tt.wantFail || !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "froog-no-such-program is not installed") {
				t.Errorf("CI=%q: exit %v, want failure %v and %q:\n%s", tt.ci, err, tt.wantFail, tt.want, out)
			}
		})
	}
}

func TestNeedPresent(t *testing.T) {
	t.Parallel()
	Need(t, "sh") // returns: sh is there
}
