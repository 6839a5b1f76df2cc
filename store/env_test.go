package store_test

import (
	"testing"

	"froog.tech/froog/store"
)

func TestEnvRepoDir(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"https://github.com/you/app":          "app",
		"https://github.com/you/app.git":      "app",
		"https://git.example:8443/a/b/tools/": "tools",
		"ssh://git@host/org/repo.git":         "repo",
		"git@github.com:you/app.git":          "app",
		"git@github.com:app":                  "app",
		"file:///tmp/x/origin.git":            "origin",
	} {
		if got := (store.EnvRepo{URL: url}).Dir(); got != want {
			t.Errorf("Dir(%s): got %q, want %q", url, got, want)
		}
	}
}
