package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/store"
)

// setDesired writes sb's desired state at at (the time a start counts at).
func setDesired(s Backend, id, state string, at time.Time) error {
	_, err := s.UpdateSandbox(ctx, id, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.DesiredState, sb.UpdatedAt = state, at
		return nil
	}, nil)
	return err
}

// startStop starts the sandbox at at and, when that works, stops it.
func startStop(s Backend, id string, at time.Time) error {
	if err := setDesired(s, id, store.StateRunning, at); err != nil {
		return err
	}
	return setDesired(s, id, store.StateStopped, at)
}

// testStartLimits: every write that starts a sandbox counts against the
// account's starts per minute, hour and day; a refusal says when a start
// is allowed again, and a start then works; refused starts, and writes
// that start nothing, do not count.
func testStartLimits(t *testing.T, o func() Backend) {
	s := open(t, o)
	ms := time.Millisecond

	t.Run("docs' limits", func(t *testing.T) {
		a := account(t, s, 1)
		sb := sandbox(t, s, a.ID, "box", nil, now) // a create is a start
		if err := setDesired(s, sb.ID, store.StateStopped, now); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < store.DefaultStartsPerMinute; i++ {
			if err := startStop(s, sb.ID, now.Add(time.Duration(i)*ms)); err != nil {
				t.Fatalf("start %d: %v", i+1, err)
			}
		}
		err := setDesired(s, sb.ID, store.StateRunning, now.Add(30*time.Second))
		var le *store.LimitError
		if !errors.As(err, &le) || !errors.Is(err, store.ErrLimit) {
			t.Fatalf("21st start in a minute: got %v, want a LimitError", err)
		}
		if le.Limit != "starts_per_minute" || le.Max != 20 || le.Window != time.Minute || !le.RetryAt.Equal(now.Add(time.Minute)) {
			t.Fatalf("21st start: got %+v, want starts_per_minute 20 per 1m, retry at %v", le, now.Add(time.Minute))
		}
		if err := setDesired(s, sb.ID, store.StateRunning, le.RetryAt.Add(-time.Microsecond)); !errors.As(err, new(*store.LimitError)) {
			t.Fatalf("a microsecond early: got %v, want a LimitError", err)
		}
		if err := setDesired(s, sb.ID, store.StateRunning, le.RetryAt); err != nil {
			t.Fatalf("start at RetryAt: %v", err)
		}
		// Already meant to run: another write starts nothing.
		if err := setDesired(s, sb.ID, store.StateRunning, le.RetryAt); err != nil {
			t.Fatalf("write to a running sandbox: %v", err)
		}
		u, err := s.AccountUsage(ctx, a.ID, le.RetryAt)
		if err != nil {
			t.Fatal(err)
		}
		if u.Running != 1 || len(u.Starts) != 21 || u.Account.ID != a.ID {
			t.Fatalf("AccountUsage: got running %d, %d starts, want 1 and 21", u.Running, len(u.Starts))
		}
		w := store.StartUsage(u.Account, u.Starts, le.RetryAt)
		if w[0].Used != 20 || w[0].Remaining() != 0 || w[1].Used != 21 || w[1].Remaining() != 79 || w[2].Used != 21 {
			t.Fatalf("windows at RetryAt: got %+v", w)
		}
	})

	t.Run("each window", func(t *testing.T) {
		a, err := s.CreateAccount(ctx, store.Account{Name: "small", MaxSandboxes: 1, StartsPerMinute: 2, StartsPerHour: 3, StartsPerDay: 4, CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "w", DesiredState: store.StateStopped, State: store.StateStopped, CreatedAt: now, UpdatedAt: now}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			at        time.Duration // after now
			wantLimit string        // "" when allowed
			wantRetry time.Duration // after now
		}{
			{0, "", 0},
			{time.Second, "", 0},
			{2 * time.Second, "starts_per_minute", time.Minute},
			{time.Minute, "", 0},
			{time.Minute + time.Second, "starts_per_hour", time.Hour},
			{time.Hour, "", 0}, // the start at 0 left the hour
			{time.Hour + time.Second, "starts_per_day", 24 * time.Hour},
			{24 * time.Hour, "", 0},
		}
		for _, tt := range tests {
			err := startStop(s, sb.ID, now.Add(tt.at))
			var le *store.LimitError
			switch {
			case tt.wantLimit == "" && err != nil:
				t.Fatalf("start at +%v: %v, want it allowed", tt.at, err)
			case tt.wantLimit != "" && (!errors.As(err, &le) || le.Limit != tt.wantLimit || !le.RetryAt.Equal(now.Add(tt.wantRetry))):
				t.Fatalf("start at +%v: got %v (%+v), want %s until +%v", tt.at, err, le, tt.wantLimit, tt.wantRetry)
			}
		}
	})

	t.Run("sandboxes at once refuse before counting", func(t *testing.T) {
		a := account(t, s, 1)
		sandbox(t, s, a.ID, "one", nil, now)
		_, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "two", DesiredState: store.StateRunning, CreatedAt: now, UpdatedAt: now}, nil)
		var le *store.LimitError
		if !errors.As(err, &le) || le.Limit != "sandboxes_at_once" || !le.RetryAt.IsZero() {
			t.Fatalf("second at once: got %v, want sandboxes_at_once without RetryAt", err)
		}
		u, err := s.AccountUsage(ctx, a.ID, now)
		if err != nil || len(u.Starts) != 1 || u.Running != 1 {
			t.Fatalf("AccountUsage: got %+v, %v; want 1 start, 1 running", u, err)
		}
		if _, err := s.AccountUsage(ctx, "acct_missing", now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("AccountUsage(missing): got %v, want ErrNotFound", err)
		}
	})

	t.Run("auto-start counts", func(t *testing.T) {
		a, err := s.CreateAccount(ctx, store.Account{Name: "auto", MaxSandboxes: 5, StartsPerMinute: 1, CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		sandbox(t, s, a.ID, "first", nil, now)
		sb, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "auto", AutoStart: true, DesiredState: store.StateStopped, State: store.StateStopped, CreatedAt: now, UpdatedAt: now}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.AutoStart(ctx, s, sb.ID, &store.AuditEvent{AccountID: a.ID, At: now, Actor: "public-url"}, now.Add(time.Second))
		var le *store.LimitError
		if !errors.As(err, &le) || le.Limit != "starts_per_minute" || !le.RetryAt.Equal(now.Add(time.Minute)) {
			t.Fatalf("auto-start past the limit: got %v, want starts_per_minute until +1m", err)
		}
		if started, err := store.AutoStart(ctx, s, sb.ID, &store.AuditEvent{AccountID: a.ID, At: now, Actor: "public-url"}, now.Add(time.Minute)); !started || err != nil {
			t.Fatalf("auto-start a minute later: %v, %v", started, err)
		}
	})

	t.Run("concurrent starts count in turn", func(t *testing.T) {
		a := account(t, s, 100)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, refused := 0, 0
		for i := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "c" + string(rune('a'+i)), DesiredState: store.StateRunning, CreatedAt: now, UpdatedAt: now}, nil)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, store.ErrLimit):
					refused++
				default:
					t.Errorf("create: %v", err)
				}
			}()
		}
		wg.Wait()
		if ok != 20 || refused != 10 {
			t.Fatalf("30 concurrent creates: %d made, %d refused; want 20 and 10", ok, refused)
		}
	})
}
