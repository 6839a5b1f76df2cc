package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/store"
)

// collect reads n changes from sub, failing after a deadline.
func collect(t *testing.T, sub *store.Subscription, n int) []store.Change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []store.Change
	for len(out) < n {
		c, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d changes: %v", len(out), n, err)
		}
		out = append(out, c)
	}
	return out
}

// quiet checks that nothing more arrives for a moment.
func quiet(t *testing.T, sub *store.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if c, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an extra change arrived: %+v, %v", c, err)
	}
}

func testFeed(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub1, err := s.Subscribe(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	sub2, err := s.Subscribe(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, s, a.ID, "box", nil, now)
	u, err := putURL(s, sb.ID, 3000, "box-3000-feed01", false, now)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: "h", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeURLToken(ctx, u.ID, tok.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	// Writes that are not on the feed publish nothing.
	if err := s.KVPut(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sandbox " + sb.ID,
		"url " + u.ID,
		"url_token " + tok.ID,
		"url_token " + tok.ID + " revoked",
		"sandbox " + sb.ID + " deleted-at",
		// the sandbox's URL and its token go with it (order within one
		// commit is the implementation's)
	}
	for i, sub := range []*store.Subscription{sub1, sub2} {
		got := collect(t, sub, len(want)+2)
		var last int64 = head
		for j, c := range got {
			if c.Seq <= last {
				t.Fatalf("subscriber %d: change %d has seq %d after %d", i, j, c.Seq, last)
			}
			last = c.Seq
		}
		desc := func(c store.Change) string {
			d := c.Kind + " " + c.ID
			switch {
			case c.URLToken != nil && c.URLToken.RevokedAt != nil:
				d += " revoked"
			case c.Sandbox != nil && c.Sandbox.DeletedAt != nil:
				d += " deleted-at"
			case c.Deleted:
				d += " deleted"
			}
			return d
		}
		for j, w := range want {
			if d := desc(got[j]); d != w {
				t.Fatalf("subscriber %d change %d: got %s, want %s", i, j, d, w)
			}
		}
		rest := map[string]bool{desc(got[5]): true, desc(got[6]): true}
		if !rest["url "+u.ID+" deleted"] || !rest["url_token "+tok.ID+" deleted"] {
			t.Fatalf("subscriber %d: the delete published %v, want the url and its token deleted", i, rest)
		}
		if got[0].Sandbox == nil || got[0].Sandbox.Name != "box" || got[1].URL == nil || got[1].URL.Hostname != "box-3000-feed01" {
			t.Fatalf("subscriber %d: changes do not carry their records: %+v", i, got[:2])
		}
		quiet(t, sub)
	}
	h2, _ := s.Head(ctx)
	if h2 != sub1.Seq() {
		t.Fatalf("Head %d, want the last seq %d", h2, sub1.Seq())
	}
	// One read brings what has committed; Buffered says how much is left.
	batch, err := s.Subscribe(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	collect(t, batch, 1)
	if n := batch.Buffered(); n != len(want)+1 {
		t.Fatalf("Buffered after the first of %d changes: %d", len(want)+2, n)
	}
	// A subscription from the middle resumes there.
	mid, err := s.Subscribe(ctx, head+2)
	if err != nil {
		t.Fatal(err)
	}
	if c := collect(t, mid, 1)[0]; c.Seq != head+3 || c.Kind != store.KindURLToken {
		t.Fatalf("resume: got %+v", c)
	}
}

// testFeedConcurrent: many writers at once; every subscriber sees each
// change exactly once, in one order that is the same for all.
func testFeedConcurrent(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 1000)
	const writers, each, subs = 4, 15, 3
	var ss []*store.Subscription
	for i := 0; i < subs; i++ {
		sub, err := s.Subscribe(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, sub)
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: fmt.Sprintf("w%d-%d", w, i), CreatedAt: now}, nil); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}(w)
	}
	results := make([][]store.Change, subs)
	var rg sync.WaitGroup
	for i, sub := range ss {
		rg.Add(1)
		go func(i int, sub *store.Subscription) {
			defer rg.Done()
			results[i] = collect(t, sub, writers*each)
		}(i, sub)
	}
	wg.Wait()
	rg.Wait()
	if t.Failed() {
		return
	}
	seen := map[string]bool{}
	for j, c := range results[0] {
		if seen[c.Sandbox.Name] {
			t.Fatalf("%s delivered twice", c.Sandbox.Name)
		}
		seen[c.Sandbox.Name] = true
		if j > 0 && c.Seq <= results[0][j-1].Seq {
			t.Fatalf("out of order: %d after %d", c.Seq, results[0][j-1].Seq)
		}
		for i := 1; i < subs; i++ {
			if results[i][j].Seq != c.Seq || results[i][j].ID != c.ID {
				t.Fatalf("subscriber %d saw %d %s at %d, subscriber 0 saw %d %s", i, results[i][j].Seq, results[i][j].ID, j, c.Seq, c.ID)
			}
		}
	}
	for _, sub := range ss {
		quiet(t, sub)
	}
	// Each writer's own changes arrive in the order it committed them.
	next := map[int]int{}
	for _, c := range results[0] {
		var w, i int
		fmt.Sscanf(c.Sandbox.Name, "w%d-%d", &w, &i)
		if i != next[w] {
			t.Fatalf("writer %d: change %d arrived before %d", w, i, next[w])
		}
		next[w]++
	}
}

func testReopen(t *testing.T, o func() Backend) {
	s := o()
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "keep", map[string]string{"x": "y"}, now)
	if _, err := putURL(s, sb.ID, 3000, "keep-3000-reopen", false, now); err != nil {
		t.Fatal(err)
	}
	if err := s.KVPut(ctx, "certs/k", []byte{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSSHKey(ctx, store.SSHKey{AccountID: a.ID, PublicKey: "ssh-ed25519 AAAA", Fingerprint: "SHA256:x", CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	head, _ := s.Head(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s = open(t, o)
	got, err := s.Sandbox(ctx, a.ID, "keep")
	if err != nil || got.Labels["x"] != "y" {
		t.Fatalf("after reopen: got %+v, %v", got, err)
	}
	if u, err := s.URL(ctx, sb.ID, 3000); err != nil || u.Hostname != "keep-3000-reopen" {
		t.Fatalf("url after reopen: %+v, %v", u, err)
	}
	if kv, err := s.KVGet(ctx, "certs/k"); err != nil || string(kv.Value) != "\x00\x01\x02" {
		t.Fatalf("kv after reopen: %+v, %v", kv, err)
	}
	if keys, err := s.SSHKeys(ctx, a.ID); err != nil || len(keys) != 1 || keys[0].Fingerprint != "SHA256:x" {
		t.Fatalf("ssh keys after reopen: %+v, %v", keys, err)
	}
	if h, _ := s.Head(ctx); h != head {
		t.Fatalf("head after reopen: %d, want %d", h, head)
	}
	// The feed goes on numbering after the reopen.
	sub, err := s.Subscribe(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	sandbox(t, s, a.ID, "after", nil, now)
	if c := collect(t, sub, 1)[0]; c.Seq != head+1 {
		t.Fatalf("first change after reopen: seq %d, want %d", c.Seq, head+1)
	}
}
