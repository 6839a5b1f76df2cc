package embedded_test

import (
	"os"
	"path/filepath"
	"testing"

	"froog.tech/froog/store/embedded"
)

// FuzzOpenLog: whatever the log file holds, Open either loads it or says
// what is wrong; it never panics.
func FuzzOpenLog(f *testing.F) {
	f.Add([]byte(`[{"t":"account","id":"acct_1","v":{"id":"acct_1","max_sandboxes":2}}]` + "\n"))
	f.Add([]byte(`[{"t":"meta","id":"meta","v":{"seq":5,"audit_seq":2}},{"t":"sandbox","id":"s","v":{"id":"s","labels":{"a":"b"}}}]` + "\n"))
	f.Add([]byte(`[{"t":"url","id":"u","del":true}]` + "\n" + `[{"t":"bogus","id":"x","v":{}}]` + "\n"))
	f.Add([]byte("[]\n[{\"t\":\"kv\""))
	f.Fuzz(func(t *testing.T, log []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "store.log"), log, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := embedded.Open(dir)
		if err != nil {
			return
		}
		s.Close()
		// A log that loaded once loads again from its compacted form.
		s, err = embedded.Open(dir)
		if err != nil {
			t.Fatalf("compacted log does not open: %v", err)
		}
		s.Close()
	})
}
