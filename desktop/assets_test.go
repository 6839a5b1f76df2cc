package desktop

import (
	"io/fs"
	"path"
	"regexp"
	"testing"
)

// browserStorage finds a touch of the browser's storage in a script.
var browserStorage = regexp.MustCompile(`\b(localStorage|sessionStorage|indexedDB|document\.cookie)\b`)

// Where third-party storage is blocked (a cross-site iframe under a
// browser's policy), touching it throws: a script that does so at its
// top level dies before the viewer connects. Every touch is in
// storage.js, which falls back to memory.
func TestAssetsTouchStorageOnlyThroughStorageJS(t *testing.T) {
	t.Parallel()
	n := 0
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".js" {
			return err
		}
		n++
		b, err := fs.ReadFile(assets, p)
		if err != nil {
			return err
		}
		if m := browserStorage.Find(b); m != nil && p != "assets/storage.js" {
			t.Errorf("%s uses %s: go through storage.js (get, set), which survives blocked storage", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("walked %d scripts: the assets are not where the test looks", n)
	}
}
