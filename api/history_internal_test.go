package api

import (
	"context"
	"testing"

	"froog.tech/froog/store/embedded"
)

// Two API processes on one store: one copier copies at a time, the one
// that holds the lease, renewing it at each round; once it lets go, the
// other takes over.
func TestHistoryCopierLease(t *testing.T) {
	t.Parallel()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var srv [2]*Server
	for i := range srv {
		if srv[i], err = New(Options{Store: st, Domain: "froog.test", SecretKey: make([]byte, 32)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	round := func(i int, owner string) bool {
		t.Helper()
		copied, err := srv[i].copyRound(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		return copied
	}
	if !round(0, "copier_a") || round(1, "copier_b") || !round(0, "copier_a") || round(1, "copier_b") {
		t.Fatal("both copiers copied, or the holder lost its lease at a renewal")
	}
	if err := st.ReleaseLease(ctx, historyLease, "copier_a"); err != nil {
		t.Fatal(err)
	}
	if !round(1, "copier_b") || round(0, "copier_a") {
		t.Fatal("the other copier did not take over once the holder let go")
	}
}
