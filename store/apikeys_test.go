package store_test

import (
	"testing"
	"time"

	"froog.tech/froog/store"
)

func TestAPIKeyVouches(t *testing.T) {
	t.Parallel()
	t0 := store.Micro(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	tests := []struct {
		name   string
		key    store.APIKey
		minted time.Time
		now    time.Time
		want   bool
	}{
		{"live, never rotated", store.APIKey{}, t0, t0.Add(time.Hour), true},
		{"revoked", store.APIKey{RevokedAt: at(time.Minute)}, t0, t0.Add(time.Hour), false},
		{"revoked later than now", store.APIKey{RevokedAt: at(2 * time.Hour)}, t0, t0.Add(time.Hour), false},
		{"expired at now", store.APIKey{ExpiresAt: at(time.Hour)}, t0, t0.Add(time.Hour), false},
		{"expires after now", store.APIKey{ExpiresAt: at(time.Hour)}, t0, t0.Add(time.Hour - time.Microsecond), true},
		{"rotated after minting", store.APIKey{RotatedAt: at(time.Microsecond)}, t0, t0.Add(time.Hour), false},
		{"minted after the rotation", store.APIKey{RotatedAt: at(-time.Minute)}, t0, t0.Add(time.Hour), true},
		{"minted at the rotation", store.APIKey{RotatedAt: at(0)}, t0, t0.Add(time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.key.Vouches(tt.minted, tt.now); got != tt.want {
				t.Fatalf("Vouches: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAPIKeyUsesWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC)
	var k store.APIKey
	k.AddUses(t0.AddDate(0, 0, -40), 100) // pruned by the next write
	k.AddUses(t0.AddDate(0, 0, -29), 1)   // the window's first day
	k.AddUses(t0.AddDate(0, 0, -30), 10)  // just out of it
	k.AddUses(t0, 2)
	if got := k.Requests(t0); got != 3 {
		t.Fatalf("Requests: got %d, want 3", got)
	}
	if len(k.Uses) > store.UsesKept {
		t.Fatalf("Uses keeps %d days, want at most %d: %v", len(k.Uses), store.UsesKept, k.Uses)
	}
	if got := k.Requests(t0.Add(time.Minute)); got != 2 {
		t.Fatalf("Requests the next day: got %d, want 2", got)
	}
}
