package route

import (
	"fmt"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func tableWith(n int) *Table {
	t := newTable()
	for i := 0; i < n; i++ {
		t.putURL(&store.URL{ID: fmt.Sprint("url_", i), Hostname: fmt.Sprintf("box-%d-abcdef", i), SandboxID: "sbx_1", Port: 3000 + i%1000})
	}
	rs := &Table{o: Options{Domain: "froog.test", Now: time.Now}}
	rs.cur.Store(t.flat())
	return rs
}

func TestLookupAllocatesNothing(t *testing.T) {
	rs := tableWith(1000)
	if rs.Lookup("box-500-abcdef.froog.test:8443") == nil || rs.Lookup("box-5000-abcdef.froog.test") != nil {
		t.Fatal("lookup finds the wrong routes")
	}
	if n := testing.AllocsPerRun(1000, func() { rs.Lookup("box-500-abcdef.froog.test:8443") }); n != 0 {
		t.Fatalf("%v allocations per lookup, want 0", n)
	}
}

func TestTableRename(t *testing.T) {
	tb := newTable()
	tb.putURL(&store.URL{ID: "u1", Hostname: "old", TokenHash: "h"})
	tb.putToken(&store.URLToken{ID: "t1", URLID: "u1", Hash: "v", ExpiresAt: time.Now().Add(time.Hour)}, time.Now())
	tb.putURL(&store.URL{ID: "u1", Hostname: "new", TokenHash: "h2"})
	if tb.byHost.at("old") != nil || tb.byHost.at("new") == nil || tb.byHost.at("new").viewers["v"].IsZero() {
		t.Fatalf("after a rename: %+v", tb.byHost)
	}
	tb.putURL(&store.URL{ID: "u1", Hostname: "new", Public: true})
	if len(tb.byHost.at("new").viewers) != 0 {
		t.Fatal("a public URL kept its viewer tokens")
	}
	tb.deleteURL("u1")
	if tb.byHost.len() != 0 || tb.byURL.len() != 0 {
		t.Fatal("a deleted URL stayed")
	}
}

func TestOwnerOfViews(t *testing.T) {
	tb := newTable()
	tb.putSandbox(&store.Sandbox{ID: "sbx_0123456789abcdef", AccountID: "acct_00000000000000aa"})
	rs := &Table{o: Options{Store: &fakeHead{}, Domain: "froog.test", Now: time.Now}}
	rs.cur.Store(tb)
	rs.current.Store(true)
	for name, want := range map[string]string{
		"desktop--0123456789abcdef.froog.test": "acct_00000000000000aa",
		"browser--0123456789abcdef.froog.test": "acct_00000000000000aa",
		"wall--00000000000000aa.froog.test":    "acct_00000000000000aa",
		"desktop--1111111111111111.froog.test": "",
		"wall--00000000000000bb.froog.test":    "",
	} {
		got, err := rs.Owner(name)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("Owner(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}
