package main

import (
	"slices"
	"testing"

	"froog.tech/froog/froog"
)

// --failed redelivers the failed ones of a listing (newest first) oldest
// first, so that they reach the app in the order they first arrived.
func TestFailedOldestFirst(t *testing.T) {
	t.Parallel()
	list := []froog.Delivery{{Id: "dlv_4", State: "failed"}, {Id: "dlv_3", State: "pending"}, {Id: "dlv_2", State: "failed"},
		{Id: "dlv_1", State: "delivered"}, {Id: "dlv_0", State: "failed"}}
	if got, want := failedOldestFirst(list), []string{"dlv_0", "dlv_2", "dlv_4"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := failedOldestFirst(nil); len(got) != 0 {
		t.Errorf("none listed: got %v", got)
	}
}

func TestLastAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    froog.Delivery
		want string
	}{
		{froog.Delivery{LastStatus: 500, LastError: "the app answered 500"}, "500"},
		{froog.Delivery{LastError: "connect to port 3000: refused"}, "connect to port 3000: refused"},
		{froog.Delivery{}, "-"},
	} {
		if got := lastAnswer(&tc.d); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
