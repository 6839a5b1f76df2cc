// Package testimage finds the VM images the tests boot: the test guest
// (deploy/tinyvm) and the OS images (deploy/images). deploy/testdeps.sh
// builds them for `make test`, each once, under ~/.cache/froog/built by a
// hash of its recipe (deploy/images/path.sh is the one place that says
// where); a test run without it builds what is missing, its progress in
// the test's log. Under go test -short it skips the test: the short
// tier boots no VM. Only tests import it.
package testimage

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"froog.tech/froog/internal/testdep"
)

// Dir is the folder of image name (tinyvm, debian-13, debian-12) built
// from this tree's recipe, through deploy/images/ensure.sh: found, it
// builds nothing; missing, it builds it first.
func Dir(t testing.TB, name string) string {
	t.Helper()
	testdep.Short(t, "boots a VM image (make test runs it, in its VM phase)")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "deploy", "images", "ensure.sh"), name)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	progress, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("image %s: %v", name, err)
	}
	var lines []string
	sc := bufio.NewScanner(progress)
	for sc.Scan() {
		t.Logf("image %s", sc.Text())
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("image %s: deploy/images/ensure.sh %s: %v\n%s", name, name, err, strings.Join(lines, "\n"))
	}
	dir := strings.TrimSpace(stdout.String())
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("image %s: deploy/images/ensure.sh printed %q: %v", name, dir, err)
	}
	return dir
}

// moduleRoot is the folder of the go.mod above the working directory
// (a test runs in its package's folder).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testimage: no go.mod above the working directory")
		}
		dir = parent
	}
}
