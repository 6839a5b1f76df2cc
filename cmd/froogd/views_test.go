package main

import (
	"context"
	"testing"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// viewNames signs for the wall of every account the store has, sandboxes or
// none, and for nothing else the route table does not name.
func TestViewNames(t *testing.T) {
	st := live.EmbeddedStore(t)
	acct, err := st.CreateAccount(context.Background(), store.Account{Name: "a", MaxSandboxes: 1, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	table, err := route.New(route.Options{Store: st, Domain: "froog.test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go table.Run(ctx)
	<-table.Ready()
	n := viewNames{Table: table, Accounts: st, Domain: "froog.test"}
	wall := names.ViewLabel(names.ViewWall, acct.ID)
	other := names.ViewLabel(names.ViewWall, "acct_00000000000000ff")
	for _, c := range []struct {
		name, want string
	}{
		{wall + ".froog.test", acct.ID},
		{other + ".froog.test", ""}, // no such account
		{names.ViewLabel(names.ViewDesktop, "sbx_00000000000000ff") + ".froog.test", ""}, // no such sandbox
		{wall + ".elsewhere.test", ""},   // another domain
		{"box-80-abcdef.froog.test", ""}, // no such URL
		{"wall--zz.froog.test", ""},      // not a view
	} {
		got, err := n.Owner(c.name)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("Owner(%s) = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
