package desktop

import (
	"context"
	"strconv"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// What the Server needs, made of the route table and the store: the
// edge wires these.

// TableAccounts lists an account's running sandboxes from the route
// table (in memory, kept by the store's change feed).
type TableAccounts struct{ Table *route.Table }

func (a TableAccounts) Running(accountID string) []WallSandbox {
	var out []WallSandbox
	for _, sb := range a.Table.RunningIn(accountID) {
		out = append(out, WallSandbox{ID: sb.ID, Name: sb.Name, Since: sb.StartedAt})
	}
	return out
}

var _ Accounts = TableAccounts{}

// LinkStore keeps desktop links (the store).
type LinkStore interface {
	CreateDesktopLink(ctx context.Context, l store.DesktopLink, ev *store.AuditEvent) (store.DesktopLink, error)
}

// StoreLinker mints the wall's desktop links in the store, as the API's
// POST /v1/sandboxes/{name}/desktop does, audited as the wall's.
type StoreLinker struct {
	Store  LinkStore
	Domain string
	Port   int // the HTTPS port visitors reach; 0 or 443: none in links
	Now    func() time.Time
}

func (l StoreLinker) DesktopLink(ctx context.Context, accountID, sandboxID string, viewOnly bool) (string, error) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	label := route.ViewLabel(route.ViewDesktop, sandboxID)
	if label == "" {
		return "", &Error{Code: CodeWrongView}
	}
	token, link := store.NewDesktopLink(store.DesktopLink{SandboxID: sandboxID, Kind: KindDesktop, ViewOnly: viewOnly}, now())
	ev := &store.AuditEvent{AccountID: accountID, At: now(), Action: "desktop.link", Actor: "wall",
		Detail: map[string]string{"sandbox_id": sandboxID, "view_only": strconv.FormatBool(viewOnly)}}
	if _, err := l.Store.CreateDesktopLink(ctx, link, ev); err != nil {
		return "", err
	}
	return route.HostURL(label, l.Domain, l.Port) + "#" + token, nil
}

var _ Linker = StoreLinker{}
