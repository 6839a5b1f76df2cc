package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// historyRec is what TestCommandHistory reads of a record.
type historyRec struct {
	ID         string `json:"id"`
	Command    string `json:"command"`
	Mode       string `json:"mode"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	StdoutSize int64  `json:"stdout_size"`
	StderrSize int64  `json:"stderr_size"`
}

// streamExec runs command as a streamed exec through c and returns its
// command_id once the stream has ended with an exit line.
func streamExec(t *testing.T, c client, name, command string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": command, "stream": true})
	req, _ := http.NewRequest("POST", c.base+"/v1/sandboxes/"+name+"/exec", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("streamed exec: status %d", res.StatusCode)
	}
	id, exited := "", false
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		var line struct {
			Type      string `json:"type"`
			CommandID string `json:"command_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("streamed exec line %q: %v", sc.Text(), err)
		}
		switch line.Type {
		case "started":
			id = line.CommandID
		case "exit":
			exited = true
		}
	}
	if id == "" || !exited {
		t.Fatalf("streamed exec: command_id %q, exit line %v", id, exited)
	}
	return id
}

// The command history through the real binary: a sync exec, a streamed
// exec and a background job each leave a record with their output, read
// through the routes while the sandbox runs and again once it has
// stopped, from the store alone; a key limited to another sandbox reads
// none of it.
func TestCommandHistory(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	c := d.c
	newSandbox(t, c, "hist", 60*time.Second)

	var sync struct {
		CommandID string `json:"command_id"`
		ExitCode  int    `json:"exit_code"`
	}
	c.call("POST", "/v1/sandboxes/hist/exec", `{"command": "echo sync-out; echo sync-err >&2; exit 3", "env": {"TOKEN_VALUE": "v4lue"}}`, 200, &sync)
	streamed := streamExec(t, c, "hist", "echo stream-out; echo stream-err >&2")
	var job struct {
		ID        string `json:"id"`
		CommandID string `json:"command_id"`
	}
	c.call("POST", "/v1/sandboxes/hist/jobs", `{"command": "echo job-out; echo job-err >&2; exit 4"}`, 201, &job)
	if job.CommandID != job.ID {
		t.Fatalf("the job's command_id %q, want its id %q", job.CommandID, job.ID)
	}
	wait.For(t, 30*time.Second, "the job ends", func() bool {
		var j struct{ Done bool }
		c.call("GET", "/v1/sandboxes/hist/jobs/"+job.ID, "", 200, &j)
		return j.Done
	})

	four, three, zero := 4, 3, 0
	want := []struct {
		id, mode       string
		code           *int
		stdout, stderr string
	}{
		{job.ID, "detached", &four, "job-out\njob-err\n", ""},
		{streamed, "stream", &zero, "stream-out\n", "stream-err\n"},
		{sync.CommandID, "sync", &three, "sync-out\n", "sync-err\n"},
	}
	check := func(when string) {
		t.Helper()
		var page struct {
			Commands   []historyRec `json:"commands"`
			NextCursor *string      `json:"next_cursor"`
		}
		c.call("GET", "/v1/sandboxes/hist/command-history", "", 200, &page)
		if len(page.Commands) != len(want) {
			t.Fatalf("%s: %d records, want %d: %+v", when, len(page.Commands), len(want), page.Commands)
		}
		for i, w := range want {
			got := page.Commands[i]
			if got.ID != w.id || got.Mode != w.mode || got.ExitCode == nil || *got.ExitCode != *w.code ||
				got.Status != "exited" || got.StdoutSize != int64(len(w.stdout)) || got.StderrSize != int64(len(w.stderr)) {
				t.Errorf("%s: record %d: %+v, want %s %s exit %d", when, i, got, w.id, w.mode, *w.code)
			}
			if strings.Contains(got.Command, "v4lue") {
				t.Errorf("%s: the record keeps an env value: %q", when, got.Command)
			}
			var one historyRec
			c.call("GET", "/v1/sandboxes/hist/command-history/"+w.id, "", 200, &one)
			if !reflect.DeepEqual(one, got) {
				t.Errorf("%s: GET %s: %+v, the list says %+v", when, w.id, one, got)
			}
			for stream, text := range map[string]string{"stdout": w.stdout, "stderr": w.stderr} {
				var l struct {
					Data       string `json:"data"`
					NextOffset int64  `json:"next_offset"`
					Done       bool   `json:"done"`
				}
				c.call("GET", fmt.Sprintf("/v1/sandboxes/hist/command-history/%s/logs?stream=%s", w.id, stream), "", 200, &l)
				if l.Data != text || l.NextOffset != int64(len(text)) || !l.Done {
					t.Errorf("%s: %s %s: %+v, want %q", when, w.id, stream, l, text)
				}
			}
		}
	}
	check("running")

	var other struct{ Key string }
	c.call("POST", "/v1/api-keys", `{"label": "elsewhere", "preset": "read-only", "sandboxes": ["elsewhere"]}`, 201, &other)
	limited := client{t: t, base: c.base, key: other.Key}
	limited.call("GET", "/v1/sandboxes/hist/command-history", "", 403, nil)
	limited.call("GET", "/v1/sandboxes/hist/command-history/"+sync.CommandID+"/logs", "", 403, nil)

	c.call("POST", "/v1/sandboxes/hist/stop", "", 202, nil)
	wait.For(t, 60*time.Second, "hist stops", func() bool {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/hist", "", 200, &sb)
		return sb.State == "stopped"
	})
	check("stopped")
}
