package store_test

import (
	"errors"
	"testing"

	"froog.tech/froog/store"
)

// TestAcceptOutput: the caps both stores apply, at their edges.
func TestAcceptOutput(t *testing.T) {
	t.Parallel()
	gz := func(n int) []byte { return make([]byte, n) }
	tests := []struct {
		name      string
		cmd       store.Command
		out       store.Output
		use       store.OutputUse
		keep      bool
		truncated bool
		err       error
	}{
		{"fits", store.Command{Mode: store.ModeSync}, store.Output{Stream: store.Stdout, Size: 10, Gzip: gz(5)}, store.OutputUse{}, true, false, nil},
		{"empty", store.Command{Mode: store.ModeSync}, store.Output{Stream: store.Stdout}, store.OutputUse{}, false, false, nil},
		{"1 MiB exactly", store.Command{Mode: store.ModeStream}, store.Output{Stream: store.Stderr, Size: store.MaxWaitingOutput, Gzip: gz(5)}, store.OutputUse{}, true, false, nil},
		{"past 1 MiB", store.Command{Mode: store.ModeSync, StdoutSize: 1}, store.Output{Stream: store.Stdout, Offset: 1, Size: store.MaxWaitingOutput, Gzip: gz(5)}, store.OutputUse{}, false, true, nil},
		{"8 MiB for a job", store.Command{Mode: store.ModeDetached, StdoutSize: 1}, store.Output{Stream: store.Stdout, Offset: 1, Size: store.MaxDetachedOutput - 1, Gzip: gz(5)}, store.OutputUse{}, true, false, nil},
		{"the hour to its end", store.Command{Mode: store.ModeSync}, store.Output{Stream: store.Stdout, Size: 1, Gzip: gz(5)}, store.OutputUse{Hour: store.MaxOutputPerHour - 5}, true, false, nil},
		{"past the hour", store.Command{Mode: store.ModeSync}, store.Output{Stream: store.Stdout, Size: 1, Gzip: gz(6)}, store.OutputUse{Hour: store.MaxOutputPerHour - 5}, false, true, nil},
		{"the account to its end", store.Command{Mode: store.ModeSync}, store.Output{Stream: store.Stdout, Size: 1, Gzip: gz(5)}, store.OutputUse{Total: store.MaxStoredPerAccount - 5}, true, false, nil},
		{"past the account's", store.Command{Mode: store.ModeSync}, store.Output{Stream: store.Stdout, Size: 1, Gzip: gz(6)}, store.OutputUse{Total: store.MaxStoredPerAccount - 5}, false, true, nil},
		{"cut by its caller", store.Command{Mode: store.ModeSync}, store.Output{Stream: store.Stdout, Size: 1, Gzip: gz(5), Truncated: true}, store.OutputUse{}, true, true, nil},
		{"truncated before", store.Command{Mode: store.ModeSync, OutputTruncated: true}, store.Output{Stream: store.Stdout, Size: 1, Gzip: gz(5)}, store.OutputUse{}, false, true, nil},
		{"not at the end", store.Command{Mode: store.ModeSync, StdoutSize: 3}, store.Output{Stream: store.Stdout, Offset: 2, Size: 1, Gzip: gz(5)}, store.OutputUse{}, false, false, store.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cmd
			keep, err := store.AcceptOutput(&c, &tt.out, tt.use)
			if !errors.Is(err, tt.err) || keep != tt.keep || c.OutputTruncated != tt.truncated {
				t.Fatalf("got keep %v, truncated %v, error %v; want %v, %v, %v", keep, c.OutputTruncated, err, tt.keep, tt.truncated, tt.err)
			}
			if size := c.Size(tt.out.Stream); keep && (size != tt.cmd.Size(tt.out.Stream)+tt.out.Size || c.StoredBytes != int64(len(tt.out.Gzip))) {
				t.Fatalf("kept: size %d, stored %d", size, c.StoredBytes)
			}
		})
	}
	c := store.Command{Mode: store.ModeSync}
	if _, err := store.AcceptOutput(&c, &store.Output{Stream: "both", Size: 1, Gzip: gz(1)}, store.OutputUse{}); err == nil {
		t.Fatal("a stream that is neither stdout nor stderr was accepted")
	}
}
