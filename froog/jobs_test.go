package froog

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Follow reads from each answer's next_offset until done, and returns the
// exit code (-1 for a job that ended without one).
func TestFollow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		exit     string
		wantCode int
	}{
		{"exited", "4", 4},
		{"killed", "null", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			chunks := []string{"one\n", "", "two\n"}
			c, f, _ := newFake(t, func(_ *fakeAPI, n int, w http.ResponseWriter, r *http.Request) {
				off := r.URL.Query().Get("offset")
				i := n - 1
				done := i == len(chunks)-1
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"id": "job_1", "state": %q, "exit_code": %s, "offset": %s, "next_offset": %d, "done": %v, "output": "", "output_b64": %q}`,
					map[bool]string{true: "exited", false: "running"}[done], map[bool]string{true: tc.exit, false: "null"}[done], off,
					len(strings.Join(chunks[:i+1], "")), done, base64.StdEncoding.EncodeToString([]byte(chunks[i])))
			})
			var out bytes.Buffer
			code, err := c.Sandbox("box").Job("job_1").Follow(context.Background(), &out)
			if err != nil || code != tc.wantCode || out.String() != "one\ntwo\n" {
				t.Fatalf("got %d %q %v, want %d, one and two", code, out.String(), err, tc.wantCode)
			}
			var offsets []string
			for _, r := range f.seen {
				offsets = append(offsets, r.URL.Query().Get("offset"))
			}
			if got := strings.Join(offsets, ","); got != "0,4,4" {
				t.Fatalf("offsets %s, want 0,4,4", got)
			}
		})
	}
}

// Waiting for a sandbox that is in error stops with its error.
func TestWaitUntilError(t *testing.T) {
	t.Parallel()
	c, _, _ := newFake(t, func(_ *fakeAPI, _ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			w.WriteHeader(202)
		}
		fmt.Fprint(w, `{"name": "box", "state": "error", "error": "the disk is gone"}`)
	})
	_, err := c.Sandbox("box").Start(context.Background(), StartSandbox{})
	if err == nil || !strings.Contains(err.Error(), "the disk is gone") {
		t.Fatalf("got %v, want the sandbox's error", err)
	}
}
