package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/store"
)

// An owner turns a URL's inbox on and off; its secret is sealed, never
// returned nor logged; its deliveries are listed, redelivered, purged.
func TestInbox(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const secret = "whsec_c2VjcmV0IHNlY3JldA=="
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		inbox := map[string]any{"match": "POST /webhooks/", "status": 200, "verify": map[string]any{"provider": "standard", "secret": secret}}
		res := e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "inbox": inbox}).want(t, 201, "")
		var u struct {
			Inbox *struct {
				Match  string
				Status int
				Verify map[string]any
			}
		}
		res.json(t, &u)
		if u.Inbox == nil || u.Inbox.Match != "POST /webhooks/" || u.Inbox.Status != 200 || u.Inbox.Verify["provider"] != "standard" || len(u.Inbox.Verify) != 1 {
			t.Fatalf("inbox: got %+v", u.Inbox)
		}
		if strings.Contains(string(res.body), "c2VjcmV0") {
			t.Fatal("the answer holds the secret")
		}
		st := storedURL(t, e, "box", 3000)
		if st.Inbox == nil || st.Inbox.Method != "POST" || st.Inbox.PathPrefix != "/webhooks/" || st.Inbox.Verify == nil ||
			strings.Contains(string(st.Inbox.Verify.SecretSealed), "c2VjcmV0") {
			t.Fatalf("stored inbox: %+v", st.Inbox)
		}
		// Absent keeps it; bad input changes nothing.
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "title": "hooks"}).want(t, 200, "")
		for _, bad := range []map[string]any{
			{"match": "post /x"}, {"match": "POST webhooks"}, {"match": "/x", "status": 302},
			{"match": "/x", "verify": map[string]any{"provider": "gitlab", "secret": "s"}},
			{"match": "/x", "verify": map[string]any{"provider": "github", "secret": ""}},
			{"match": "/x", "verify": map[string]any{"provider": "standard", "secret": "whsec_%%%"}},
			{"status": 202},
		} {
			e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "inbox": bad}).want(t, 400, "invalid_value")
		}
		if st := storedURL(t, e, "box", 3000); st.Inbox == nil || st.Inbox.Status != 200 {
			t.Fatalf("the inbox changed: %+v", st.Inbox)
		}

		// Deliveries: one stored by an edge and delivered.
		ctx := context.Background()
		d, err := e.store.AddDelivery(ctx, store.Delivery{ID: store.NewID("dlv"), URLID: st.ID, AccountID: st.AccountID, SandboxID: st.SandboxID, Port: 3000,
			Method: "POST", Target: "/webhooks/a", Body: []byte("{}"), ReceivedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		var list []struct {
			ID, State  string
			Attempts   int
			LastStatus int `json:"last_status"`
		}
		e.do("POST", "/v1/sandboxes/box/urls/3000/deliveries/"+d.ID+"/redeliver", e.admin, nil).want(t, 409, "delivery_queued")
		if _, err := e.store.ClaimDelivery(ctx, st.ID, "edge", time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.FinishDelivery(ctx, d.ID, "edge", store.DeliveryResult{Status: 204, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		reader := e.key("reader", "sandbox.read")
		e.do("GET", "/v1/sandboxes/box/urls/3000/deliveries", reader, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 || list[0].ID != d.ID || list[0].State != "delivered" || list[0].Attempts != 1 || list[0].LastStatus != 204 {
			t.Fatalf("deliveries: %+v", list)
		}
		e.do("POST", "/v1/sandboxes/box/urls/3000/deliveries/"+d.ID+"/redeliver", reader, nil).want(t, 403, "")
		e.do("POST", "/v1/sandboxes/box/urls/3000/deliveries/dlv_none/redeliver", e.admin, nil).want(t, 404, "not_found")
		e.do("POST", "/v1/sandboxes/box/urls/3000/deliveries/"+d.ID+"/redeliver", e.admin, nil).want(t, 200, "")
		e.do("GET", "/v1/sandboxes/box/urls/3000/deliveries", reader, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 || list[0].State != "pending" {
			t.Fatalf("after redeliver: %+v", list)
		}
		var purged struct{ Purged int }
		e.do("DELETE", "/v1/sandboxes/box/urls/3000/deliveries", e.admin, nil).want(t, 200, "").json(t, &purged)
		if purged.Purged != 1 {
			t.Fatalf("purged %d, want 1", purged.Purged)
		}

		// null turns it off; each change is audited, the secret nowhere.
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "inbox": nil}).want(t, 200, "")
		if st := storedURL(t, e, "box", 3000); st.Inbox != nil {
			t.Fatalf("inbox still on: %+v", st.Inbox)
		}
		evs, _ := e.store.Audit(ctx, e.account.ID, 0, 0)
		var got []string
		for _, ev := range evs {
			if v, ok := ev.Detail["inbox"]; ok {
				got = append(got, ev.Action+":"+v)
			}
		}
		if strings.Join(got, " ") != "url.update:off url.create:on" {
			t.Errorf("audit: got %q", got)
		}
		if strings.Contains(e.logs.String(), "c2VjcmV0") {
			t.Error("a log line holds the secret")
		}
	})
}
