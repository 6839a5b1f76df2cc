package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"froog.tech/froog/desktop"
	"froog.tech/froog/edge/route"
	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// The desktop server's adapters, made of the route table and the store:
// the wall's list of running sandboxes, the wall's desktop links, and
// which view hosts get certificates. startEdge wires them.

// wallAccounts lists an account's running sandboxes from the route
// table (in memory, kept by the store's change feed).
type wallAccounts struct{ Table *route.Table }

func (a wallAccounts) Running(accountID string) []desktop.WallSandbox {
	var out []desktop.WallSandbox
	for _, sb := range a.Table.RunningIn(accountID) {
		out = append(out, desktop.WallSandbox{ID: sb.ID, Name: sb.Name, Since: sb.StartedAt})
	}
	return out
}

func (a wallAccounts) Changed() <-chan struct{} { return a.Table.Changed() }

var _ desktop.Accounts = wallAccounts{}

// linkStore keeps desktop links (the store).
type linkStore interface {
	CreateDesktopLink(ctx context.Context, l store.DesktopLink, ev *store.AuditEvent) (store.DesktopLink, error)
}

// wallLinker mints the wall's desktop links in the store, as the API's
// POST /v1/sandboxes/{name}/desktop does, audited as the wall's.
type wallLinker struct {
	Store  linkStore
	Domain string
	Port   int // the HTTPS port visitors reach; 0 or 443: none in links
	Now    func() time.Time
}

func (l wallLinker) DesktopLink(ctx context.Context, r desktop.LinkRequest) (string, error) {
	accountID, sandboxID, viewOnly := r.AccountID, r.SandboxID, r.ViewOnly
	if r.Run.IsZero() {
		return "", &desktop.Error{Code: desktop.CodeSandboxStopped}
	}
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	label := names.ViewLabel(names.ViewDesktop, sandboxID)
	if label == "" {
		return "", &desktop.Error{Code: desktop.CodeWrongView}
	}
	token, link := store.NewDesktopLink(store.DesktopLink{SandboxID: sandboxID, Kind: names.ViewDesktop, ViewOnly: viewOnly, Run: r.Run, KeyID: r.KeyID}, now())
	ev := &store.AuditEvent{AccountID: accountID, At: now(), Action: "desktop.link", Actor: "wall",
		Detail: map[string]string{"sandbox_id": sandboxID, "view_only": strconv.FormatBool(viewOnly)}}
	if _, err := l.Store.CreateDesktopLink(ctx, link, ev); err != nil {
		return "", err
	}
	return names.HostURL(label, l.Domain, l.Port) + "#" + token, nil
}

var _ desktop.Linker = wallLinker{}

// accountStore finds an account by id (the store).
type accountStore interface {
	Account(ctx context.Context, id string) (store.Account, error)
}

// viewNames says which host names certificates are ordered or signed for
// (the certs package's viewNames): the route table's, and also the wall host
// of any account the store has. The table knows an account by its
// sandboxes, so without this the wall of an account with none yet has no
// certificate, and its link fails in TLS instead of saying that nothing
// runs. Only existing accounts' walls qualify, so made-up wall names
// still get nothing.
type viewNames struct {
	Table    *route.Table
	Accounts accountStore
	Domain   string
}

func (n viewNames) Owner(name string) (string, error) {
	id, err := n.Table.Owner(name)
	if !errors.Is(err, route.ErrUnknownName) {
		return id, err
	}
	v, ok := names.ParseView(names.Label(name, n.Domain))
	if !ok || v.Kind != names.ViewWall {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, aerr := n.Accounts.Account(ctx, v.ID); aerr != nil {
		return "", err
	}
	return v.ID, nil
}
