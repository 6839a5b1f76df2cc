package wake_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/wake"
)

// rig is an embedded store with one account and a Follower of its feed.
type rig struct {
	st   *embedded.Store
	acct store.Account
	fl   *wake.Follower
}

func newRig(t *testing.T) *rig {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := st.CreateAccount(t.Context(), store.Account{Name: "a", MaxSandboxes: 10, URLNamesPerDay: 10, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := wake.NewFollower(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{st: st, acct: a, fl: fl}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.fl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// sandbox makes a sandbox in state (desired the same), with auto_start.
func (r *rig) sandbox(t *testing.T, state string, autoStart bool) store.Sandbox {
	t.Helper()
	sb, err := r.st.CreateSandbox(t.Context(), store.Sandbox{AccountID: r.acct.ID, Name: "box-" + store.NewID("n")[2:10], State: state, DesiredState: state,
		AutoStart: autoStart, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func (r *rig) set(t *testing.T, id string, fn func(*store.Sandbox)) {
	t.Helper()
	if _, err := r.st.UpdateSandbox(context.Background(), id, func(sb *store.Sandbox, _ *store.AuditEvent) error { fn(sb); return nil }, nil); err != nil {
		t.Error(err)
	}
}

func (r *rig) get(t *testing.T, id string) store.Sandbox {
	t.Helper()
	sb, err := r.st.SandboxByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func known(sb store.Sandbox) wake.Sandbox {
	return wake.Sandbox{State: sb.State, DesiredState: sb.DesiredState, AutoStart: sb.AutoStart, UpdatedAt: sb.UpdatedAt}
}

// fakeDialer refuses a port until open, counting dials.
type fakeDialer struct {
	open  atomic.Bool
	dials atomic.Int64
}

var errPortClosedFake = errors.New("fake: nothing listens")

func (d *fakeDialer) DialContext(ctx context.Context, id string, port int) (net.Conn, error) {
	d.dials.Add(1)
	if !d.open.Load() {
		return nil, errPortClosedFake
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (r *rig) waker(t *testing.T, d wake.Dialer) *wake.Waker {
	t.Helper()
	w, err := wake.New(wake.Options{Store: r.st, Feed: r.fl, Dialer: d})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func autoStarts(t *testing.T, st *embedded.Store, accountID string) int {
	t.Helper()
	evs, err := st.Audit(context.Background(), accountID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Action == "sandbox.auto_start" {
			n++
		}
	}
	return n
}

// Ten asks for a stopped sandbox share one start (one audit event), and
// all end once the feed says it runs and its port answers.
func TestWaitStartsOnceAndFollowsTheFeed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	sb := r.sandbox(t, store.StateStopped, true)
	d := &fakeDialer{}
	w := r.waker(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			errs <- w.Wait(ctx, wake.Ask{SandboxID: sb.ID, Port: 8080, Known: known(sb), Audit: &store.AuditEvent{AccountID: r.acct.ID, Actor: "test"}})
		}()
	}
	wait.For(t, 10*time.Second, "the sandbox meant to run", func() bool { return r.get(t, sb.ID).DesiredState == store.StateRunning })
	r.set(t, sb.ID, func(s *store.Sandbox) { s.State = store.StateStarting })
	r.set(t, sb.ID, func(s *store.Sandbox) { s.State = store.StateRunning })
	wait.For(t, 10*time.Second, "a dial of the running sandbox's port", func() bool { return d.dials.Load() > 0 })
	select {
	case err := <-errs:
		t.Fatalf("a wait ended before the port answered: %v", err)
	default:
	}
	d.open.Store(true)
	for range 10 {
		if err := <-errs; err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	}
	if n := autoStarts(t, r.st, r.acct.ID); n != 1 {
		t.Fatalf("got %d sandbox.auto_start events, want 1", n)
	}
}

// A change written after NewFollower but before Run's goroutine first
// runs reaches the Follower: it follows from the head it read when made,
// so an ask that read the sandbox after that misses none of its changes
// (a wait once slept through Starting and Running this way, under load).
func TestFollowerMissesNothingBeforeRun(t *testing.T) {
	t.Parallel()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fl, err := wake.NewFollower(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.CreateAccount(t.Context(), store.Account{Name: "a", MaxSandboxes: 10, URLNamesPerDay: 10, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.CreateSandbox(t.Context(), store.Sandbox{AccountID: a.ID, Name: "box", State: store.StateRunning, DesiredState: store.StateRunning, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, 10*time.Second, "the Follower to know the sandbox made before Run", func() bool {
		got, ok := fl.Sandbox(sb.ID)
		return ok && got.State == store.StateRunning
	})
}

// fakeFeed is a Feed in memory that counts its reads.
type fakeFeed struct {
	mu    sync.Mutex
	m     map[string]wake.Sandbox
	sig   store.Signal
	reads atomic.Int64
}

func (f *fakeFeed) Sandbox(id string) (wake.Sandbox, bool) {
	f.reads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.m[id]
	return sb, ok
}

func (f *fakeFeed) Changed() <-chan struct{} { return f.sig.Changed() }

func (f *fakeFeed) set(id string, sb wake.Sandbox) {
	f.mu.Lock()
	f.m[id] = sb
	f.mu.Unlock()
	f.sig.Wake()
}

// While nothing changes, a wait does not look again, however long it
// waits (an hour of the bubble's clock): it sleeps on the feed, and
// reads it once per change.
func TestWaitDoesNotPoll(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		starting := wake.Sandbox{State: store.StateStarting, DesiredState: store.StateRunning, AutoStart: true}
		feed := &fakeFeed{m: map[string]wake.Sandbox{"sbx_1": starting}}
		w, err := wake.New(wake.Options{Store: fakeNoStore{}, Feed: feed})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Wait(context.Background(), wake.Ask{SandboxID: "sbx_1", Known: starting}) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := feed.reads.Load(); n != 1 {
			t.Fatalf("in an hour with no change, got %d reads of the feed, want 1", n)
		}
		feed.set("sbx_2", wake.Sandbox{})
		synctest.Wait()
		if n := feed.reads.Load(); n != 2 {
			t.Fatalf("after one change, got %d reads of the feed, want 2", n)
		}
		running := starting
		running.State = store.StateRunning
		feed.set("sbx_1", running)
		if err := <-done; err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	})
}

// seenFeed notes when a wait has read its sandbox meant to run.
type seenFeed struct {
	wake.Feed
	meant atomic.Bool
}

func (f *seenFeed) Sandbox(id string) (wake.Sandbox, bool) {
	sb, ok := f.Feed.Sandbox(id)
	if ok && sb.DesiredState == store.StateRunning {
		f.meant.Store(true)
	}
	return sb, ok
}

// fakeNoStore is a store no test writes to.
type fakeNoStore struct{}

func (fakeNoStore) UpdateSandbox(context.Context, string, func(*store.Sandbox, *store.AuditEvent) error, *store.AuditEvent) (store.Sandbox, error) {
	return store.Sandbox{}, errors.New("fake: no store")
}

func TestWaitRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.waker(t, &fakeDialer{})
	ev := func() *store.AuditEvent { return &store.AuditEvent{AccountID: r.acct.ID, Actor: "test"} }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("no auto_start", func(t *testing.T) {
		sb := r.sandbox(t, store.StateStopped, false)
		if err := w.Wait(ctx, wake.Ask{SandboxID: sb.ID, Known: known(sb), Audit: ev()}); !errors.Is(err, wake.ErrNotAutoStart) {
			t.Fatalf("got %v, want ErrNotAutoStart", err)
		}
	})
	t.Run("in error", func(t *testing.T) {
		sb := r.sandbox(t, store.StateError, true)
		var refused *store.StartRefusedError
		if err := w.Wait(ctx, wake.Ask{SandboxID: sb.ID, Known: known(sb), Audit: ev()}); !errors.As(err, &refused) {
			t.Fatalf("got %v, want a StartRefusedError", err)
		}
	})
	for _, c := range []struct {
		name string
		fn   func(*store.Sandbox)
	}{
		{"fails to start", func(s *store.Sandbox) { s.State = store.StateError }},
		{"stopped meanwhile", func(s *store.Sandbox) { s.DesiredState = store.StateStopped }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := r.sandbox(t, store.StateStopped, true)
			feed := &seenFeed{Feed: r.fl}
			w, err := wake.New(wake.Options{Store: r.st, Feed: feed})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Wait(ctx, wake.Ask{SandboxID: sb.ID, Known: known(sb), Audit: ev()}) }()
			// The wait has seen its start on the feed (a stop folded into
			// the same read of the feed as the start looks like the feed's
			// lag, and ends at the deadline).
			wait.For(t, 10*time.Second, "the wait sees the sandbox meant to run", feed.meant.Load)
			r.set(t, sb.ID, func(s *store.Sandbox) { s.State = store.StateStarting })
			r.set(t, sb.ID, c.fn)
			var failed *wake.FailedError
			if err := <-done; !errors.As(err, &failed) {
				t.Fatalf("got %v, want a FailedError", err)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		sb := r.sandbox(t, store.StateStopped, true)
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := w.Wait(tctx, wake.Ask{SandboxID: sb.ID, Known: known(sb), Audit: ev()}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the deadline", err)
		}
	})
}

// An asker that leaves does not take the start with it: the others get
// its answer, and no goroutine is left.
func TestStartOutlivesItsAsker(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	sb := r.sandbox(t, store.StateStopped, true)
	w := r.waker(t, nil)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.Start(gone, wake.Ask{SandboxID: sb.ID, Known: known(sb), Audit: &store.AuditEvent{AccountID: r.acct.ID, Actor: "test"}})
	}()
	wg.Wait()
	wait.For(t, 10*time.Second, "the start recorded", func() bool { return r.get(t, sb.ID).DesiredState == store.StateRunning })
}

// fakeChangeLog is a store.ChangeLog that holds one change, then says
// the subscriber fell behind (store.ErrFeedGap) until it reads from the
// head again.
type fakeChangeLog struct {
	mu   sync.Mutex
	gap  bool
	sig  store.Signal
	head int64
}

func (l *fakeChangeLog) ChangesAfter(_ context.Context, after int64, _ int) ([]store.Change, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.gap && after < l.head:
		return nil, store.ErrFeedGap
	case after == 0 && !l.gap:
		return []store.Change{{Seq: 1, Kind: store.KindSandbox, ID: "sbx_1", Sandbox: &store.Sandbox{ID: "sbx_1", State: store.StateRunning}}}, nil
	}
	return nil, nil
}

func (l *fakeChangeLog) Head(context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head, nil
}

func (l *fakeChangeLog) Changed() <-chan struct{} { return l.sig.Changed() }

type fakeFeedOf struct{ log *fakeChangeLog }

func (f fakeFeedOf) Subscribe(ctx context.Context, after int64) (*store.Subscription, error) {
	return store.NewSubscription(ctx, f.log, after)
}

func (f fakeFeedOf) Head(ctx context.Context) (int64, error) { return f.log.Head(ctx) }

// After a gap in the feed the Follower forgets what it knew (the askers'
// reads hold again) and follows on from the head.
func TestFollowerForgetsAfterAGap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		log := &fakeChangeLog{}
		fl, err := wake.NewFollower(context.Background(), fakeFeedOf{log})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go fl.Run(ctx)
		synctest.Wait()
		if sb, ok := fl.Sandbox("sbx_1"); !ok || sb.State != store.StateRunning {
			t.Fatalf("before the gap: got %+v %v, want sbx_1 running", sb, ok)
		}
		log.mu.Lock()
		log.gap, log.head = true, 100
		log.mu.Unlock()
		log.sig.Wake()
		time.Sleep(time.Second) // the bubble's clock: past the retry
		synctest.Wait()
		if sb, ok := fl.Sandbox("sbx_1"); ok {
			t.Fatalf("after the gap: got %+v, want it forgotten", sb)
		}
		cancel()
		synctest.Wait()
	})
}

// A stop written right after the wait's own start ends the wait, even
// when the feed never showed the start (both writes in one read of the
// feed): the record is newer than the start and not meant to run.
func TestStopBeforeTheFeedShowsTheStart(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	sb := r.sandbox(t, store.StateStopped, true)
	feed := &fakeFeed{m: map[string]wake.Sandbox{}}
	w, err := wake.New(wake.Options{Store: r.st, Feed: feed})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- w.Wait(ctx, wake.Ask{SandboxID: sb.ID, Known: known(sb), Audit: &store.AuditEvent{AccountID: r.acct.ID, Actor: "test"}})
	}()
	wait.For(t, 10*time.Second, "the sandbox meant to run", func() bool { return r.get(t, sb.ID).DesiredState == store.StateRunning })
	stopped := r.get(t, sb.ID)
	stopped.DesiredState, stopped.UpdatedAt = store.StateStopped, time.Now().Add(time.Second)
	feed.set(sb.ID, known(stopped))
	var failed *wake.FailedError
	if err := <-done; !errors.As(err, &failed) {
		t.Fatalf("got %v, want a *FailedError (the stop), not the deadline", err)
	}
}
