package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// portsJSON is the answer of every ports route.
type portsJSON struct {
	Ports []struct {
		Port      int
		Protocol  string
		Open      bool
		PublicURL bool `json:"public_url"`
	}
	IPv6 *string `json:"ipv6"`
	Max  int
}

// list is "PORT/PROTO" for each, with "+url" when a public URL opens it
// and "!" when it is not open here.
func (p portsJSON) list() string {
	var out []string
	for _, x := range p.Ports {
		s := fmt.Sprintf("%d/%s", x.Port, x.Protocol)
		if x.PublicURL {
			s += "+url"
		}
		if !x.Open {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func (e *env) storedPorts(name string) []store.Port {
	e.t.Helper()
	sb, err := e.store.Sandbox(context.Background(), e.account.ID, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb.Ports
}

// Opening, listing, replacing and closing ports: each answer is the
// list, sorted, each port once, with the public URLs' TCP ports marked;
// a fork gets the same ones; the changes are in the audit log.
func TestPorts(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box"}`).want(t, 202, "")
		var got portsJSON
		e.do("GET", "/v1/sandboxes/box/ports", e.admin, nil).want(t, 200, "").json(t, &got)
		if got.list() != "" || got.Max != 64 || got.IPv6 != nil {
			t.Fatalf("a new sandbox's ports: %+v, want none, max 64, no ipv6 before it runs", got)
		}
		e.do("POST", "/v1/sandboxes/box/ports", e.admin, `{"port":27015,"protocol":"udp"}`).want(t, 200, "").json(t, &got)
		e.do("POST", "/v1/sandboxes/box/ports", e.admin, `{"port":5432}`).want(t, 200, "").json(t, &got)
		e.do("POST", "/v1/sandboxes/box/ports", e.admin, `{"port":5432,"protocol":"tcp"}`).want(t, 200, "").json(t, &got)
		if want := "5432/tcp 27015/udp"; got.list() != want {
			t.Fatalf("after opening: %q, want %q", got.list(), want)
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, `{"port":3000,"public":true}`).want(t, 201, "")
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, `{"port":4000}`).want(t, 201, "")
		e.do("GET", "/v1/sandboxes/box/ports", e.admin, nil).want(t, 200, "").json(t, &got)
		if want := "3000/tcp+url! 5432/tcp 27015/udp"; got.list() != want {
			t.Fatalf("with a public and a private URL: %q, want %q", got.list(), want)
		}
		e.do("DELETE", "/v1/sandboxes/box/ports/3000/tcp", e.admin, nil).want(t, 409, "port_from_url")
		e.do("DELETE", "/v1/sandboxes/box/ports/4000/tcp", e.admin, nil).want(t, 404, "not_found")
		e.do("DELETE", "/v1/sandboxes/box/ports/27015/tcp", e.admin, nil).want(t, 404, "not_found")
		e.do("DELETE", "/v1/sandboxes/box/ports/27015/udp", e.admin, nil).want(t, 200, "").json(t, &got)
		if want := "3000/tcp+url! 5432/tcp"; got.list() != want {
			t.Fatalf("after closing 27015/udp: %q, want %q", got.list(), want)
		}
		e.do("PUT", "/v1/sandboxes/box/ports", e.admin, `{"ports":[{"port":9000,"protocol":"udp"},{"port":3000},{"port":22}]}`).want(t, 200, "").json(t, &got)
		if want := "22/tcp 3000/tcp+url 9000/udp"; got.list() != want {
			t.Fatalf("after PUT: %q, want %q", got.list(), want)
		}
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, `{}`) // a policy change keeps it public
		e.do("DELETE", "/v1/sandboxes/box/urls/3000", e.admin, nil).want(t, 200, "")
		e.do("GET", "/v1/sandboxes/box/ports", e.admin, nil).want(t, 200, "").json(t, &got)
		if want := "22/tcp 3000/tcp 9000/udp"; got.list() != want {
			t.Fatalf("after the URL went: %q, want %q", got.list(), want)
		}

		e.running("box", e.now())
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, `{"name":"twin"}`).want(t, 202, "")
		e.do("GET", "/v1/sandboxes/twin/ports", e.admin, nil).want(t, 200, "").json(t, &got)
		if want := "22/tcp 3000/tcp 9000/udp"; got.list() != want {
			t.Fatalf("the fork's ports: %q, want %q", got.list(), want)
		}
		e.do("PUT", "/v1/sandboxes/box/ports", e.admin, `{"ports":[]}`).want(t, 200, "").json(t, &got)
		if got.list() != "" || e.storedPorts("box") != nil {
			t.Fatalf("after PUT []: %q, stored %v", got.list(), e.storedPorts("box"))
		}

		var audit struct {
			Events []struct {
				Action, Target string
				Detail         map[string]string
			}
		}
		e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").json(t, &audit)
		var ports []string
		for _, ev := range audit.Events {
			if strings.HasPrefix(ev.Action, "port.") {
				ports = append(ports, ev.Action+" "+ev.Target+" "+ev.Detail["port"]+ev.Detail["ports"])
			}
		}
		slices.Reverse(ports)
		want := []string{"port.open box 27015/udp", "port.open box 5432/tcp", "port.close box 27015/udp", "port.set box 22/tcp,3000/tcp,9000/udp", "port.set box "}
		if !slices.Equal(ports, want) {
			t.Fatalf("audit: got %q, want %q (opening an open port records nothing)", ports, want)
		}
	})
}

// The sandbox shows its IPv6 address while it runs, and so does the list
// of its ports; a stopped one shows null.
func TestPortsIPv6(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box"}`).want(t, 202, "")
		sb := e.running("box", e.now())
		if _, err := e.store.UpdateSandbox(context.Background(), sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
			s.IPv6 = "2001:db8::5"
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		var view struct {
			IPv6 *string `json:"ipv6"`
		}
		e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &view)
		var ports portsJSON
		e.do("GET", "/v1/sandboxes/box/ports", e.admin, nil).want(t, 200, "").json(t, &ports)
		if view.IPv6 == nil || *view.IPv6 != "2001:db8::5" || ports.IPv6 == nil || *ports.IPv6 != "2001:db8::5" {
			t.Fatalf("running: ipv6 %v and %v, want 2001:db8::5", view.IPv6, ports.IPv6)
		}
		e.stopped("box")
		e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &view)
		if view.IPv6 != nil {
			t.Fatalf("stopped: ipv6 %v, want null", *view.IPv6)
		}
	})
}

// Malformed input is a 400 with a code, and changes nothing.
func TestPortsMalformed(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box"}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/box/ports", e.admin, `{"port":80}`).want(t, 200, "")
		tests := []struct {
			method, path string
			body         any
			code         string
		}{
			{"POST", "/ports", nil, "invalid_json"},
			{"POST", "/ports", `{}`, "invalid_port"},
			{"POST", "/ports", `{"port":0}`, "invalid_port"},
			{"POST", "/ports", `{"port":65536}`, "invalid_port"},
			{"POST", "/ports", `{"port":-1,"protocol":"tcp"}`, "invalid_port"},
			{"POST", "/ports", `{"port":53,"protocol":"sctp"}`, "invalid_port"},
			{"POST", "/ports", `{"port":53,"protocol":"UDP"}`, "invalid_port"},
			{"POST", "/ports", `{"port":"53"}`, "invalid_type"},
			{"POST", "/ports", `{"port":53.5}`, "invalid_type"},
			{"POST", "/ports", `{"port":53,"extra":1}`, "unknown_field"},
			{"POST", "/ports", `[{"port":53}]`, "invalid_json"},
			{"PUT", "/ports", `{}`, "invalid_port"},
			{"PUT", "/ports", `{"ports":null}`, "invalid_port"},
			{"PUT", "/ports", `{"ports":[{"port":53},{"port":0}]}`, "invalid_port"},
			{"PUT", "/ports", `{"ports":[{"port":53,"protocol":"icmp"}]}`, "invalid_port"},
			{"PUT", "/ports", `{"ports":{"port":53}}`, "invalid_type"},
			{"DELETE", "/ports/80/sctp", nil, "invalid_port"},
			{"DELETE", "/ports/0/tcp", nil, "invalid_port"},
			{"DELETE", "/ports/99999/tcp", nil, "invalid_port"},
			{"DELETE", "/ports/http/tcp", nil, "invalid_port"},
			{"DELETE", "/ports/+80/tcp", nil, "invalid_port"},
			{"DELETE", "/ports/80/TCP", nil, "invalid_port"},
		}
		for _, tt := range tests {
			t.Run(tt.method+" "+tt.path+" "+fmt.Sprint(tt.body), func(t *testing.T) {
				e.do(tt.method, "/v1/sandboxes/box"+tt.path, e.admin, tt.body).want(t, 400, tt.code)
				if got := e.storedPorts("box"); !slices.Equal(got, []store.Port{{Port: 80, Protocol: "tcp"}}) {
					t.Fatalf("a refused request changed the ports: %v", got)
				}
			})
		}
	})
}

// At most 64, public URLs' TCP ports included: past it, 409
// too_many_ports and nothing changes, whether a port or a public URL
// would pass it.
func TestPortsLimit(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box"}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, `{"port":3000,"public":true}`).want(t, 201, "")
		var list []string
		for i := 1; i <= 63; i++ {
			list = append(list, fmt.Sprintf(`{"port":%d,"protocol":"udp"}`, i))
		}
		e.do("PUT", "/v1/sandboxes/box/ports", e.admin, `{"ports":[`+strings.Join(list, ",")+`]}`).want(t, 200, "")
		e.do("POST", "/v1/sandboxes/box/ports", e.admin, `{"port":64,"protocol":"udp"}`).want(t, 409, "too_many_ports")
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, `{"port":4000,"public":true}`).want(t, 409, "too_many_ports")
		e.do("POST", "/v1/sandboxes/box/ports", e.admin, `{"port":3000}`).want(t, 200, "") // the URL's own: no more
		over := append(slices.Clone(list), `{"port":64,"protocol":"udp"}`, `{"port":65,"protocol":"udp"}`)
		e.do("PUT", "/v1/sandboxes/box/ports", e.admin, `{"ports":[`+strings.Join(over, ",")+`]}`).want(t, 409, "too_many_ports")
		if n := len(e.storedPorts("box")); n != 64 {
			t.Fatalf("after refused writes: %d ports stored, want 64", n)
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, `{"port":4000}`).want(t, 201, "") // a private URL opens nothing
	})
}

// Reading needs sandbox.read, changing sandbox.update; a key limited by
// name or label reaches only its sandboxes. A refused change writes
// nothing.
func TestPortsScopes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"mine","labels":{"team":"a"}}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"theirs","labels":{"team":"b"}}`).want(t, 202, "")
		readOnly, _ := api.PresetActions("read-only")
		fullSandbox, _ := api.PresetActions("full-sandbox")
		keys := map[string]string{
			"read-only":    e.key("read-only", readOnly...),
			"full-sandbox": e.key("full-sandbox", fullSandbox...),
			"update only":  e.key("update", "sandbox.update"),
			"read only":    e.key("read", "sandbox.read"),
			"by name":      e.keyWith("by-name", func(k *store.APIKey) { k.Sandboxes = []string{"mine"} }, "*"),
			"by label":     e.keyWith("by-label", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, api.Presets["ci"]...),
		}
		type call struct{ method, path, body string }
		calls := []call{
			{"POST", "/ports", `{"port":1234}`},
			{"PUT", "/ports", `{"ports":[{"port":1234}]}`},
			{"DELETE", "/ports/1234/tcp", ""},
		}
		tests := []struct {
			key, box     string
			read, change int
			code         string
		}{
			{"read-only", "mine", 200, 403, "api_key_action_forbidden"},
			{"read only", "mine", 200, 403, "api_key_action_forbidden"},
			{"update only", "mine", 403, 200, "api_key_action_forbidden"},
			{"by name", "theirs", 403, 403, "api_key_sandbox_forbidden"},
			{"by label", "theirs", 403, 403, "api_key_sandbox_forbidden"},
			{"full-sandbox", "mine", 200, 200, ""},
			{"by name", "mine", 200, 200, ""},
			{"by label", "mine", 200, 200, ""},
		}
		for _, tt := range tests {
			t.Run(tt.key+" "+tt.box, func(t *testing.T) {
				code := ""
				if tt.read != 200 {
					code = tt.code
				}
				e.do("GET", "/v1/sandboxes/"+tt.box+"/ports", keys[tt.key], nil).want(t, tt.read, code)
				code = ""
				if tt.change != 200 {
					code = tt.code
				}
				for _, c := range calls {
					var body any
					if c.body != "" {
						body = c.body
					}
					e.do(c.method, "/v1/sandboxes/"+tt.box+c.path, keys[tt.key], body).want(t, tt.change, code)
					if tt.change != 200 && e.storedPorts(tt.box) != nil {
						t.Fatalf("a refused %s wrote ports: %v", c.method, e.storedPorts(tt.box))
					}
				}
			})
		}
		if e.storedPorts("theirs") != nil {
			t.Fatal("a sandbox no key could change has ports")
		}
	})
}

// Open ports belong to the sandbox, not to its disk (the docs' Network:
// "Open ports stay open across stops, starts and restores, and a fork
// gets the same ones"): a restore keeps the ports open now, not those
// open when the snapshot was taken; copies forked from a snapshot get
// the source's ports, as any fork does; a new sandbox from a saved
// snapshot gets none (a template gives its disk, not its source's
// settings). Through hostctl and the local driver, so the restore that
// rewrites the sandbox is the real one.
func TestPortsRestoreFork(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.running("box")
		ports := func(name string) string {
			t.Helper()
			var got portsJSON
			e.do("GET", "/v1/sandboxes/"+name+"/ports", e.admin, nil).want(t, 200, "").json(t, &got)
			return got.list()
		}
		e.do("PUT", "/v1/sandboxes/box/ports", e.admin, `{"ports":[{"port":5432},{"port":27015,"protocol":"udp"}]}`).want(t, 200, "")
		var sn snapJSON
		e.do("POST", "/v1/sandboxes/box/snapshots", e.admin, map[string]any{"label": "with-db"}).want(t, 202, "").json(t, &sn)
		// The waits bound a hang: under make test's parallel phase a
		// saved snapshot took hostctl over 15 s.
		wait.For(t, time.Minute, "the saved snapshot", func() bool {
			e.do("GET", "/v1/sandboxes/box/snapshots/with-db", e.admin, nil).want(t, 200, "").json(t, &sn)
			return sn.Status == "available"
		})
		e.do("PUT", "/v1/sandboxes/box/ports", e.admin, `{"ports":[{"port":9000,"protocol":"udp"}]}`).want(t, 200, "")

		e.do("POST", "/v1/sandboxes/box/restore", e.admin, map[string]any{"snapshot": "with-db"}).want(t, 202, "")
		wait.For(t, time.Minute, "the restore done and box running again", func() bool {
			var sb struct {
				State       string
				RestoreFrom string `json:"restore_from"`
			}
			e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &sb)
			return sb.RestoreFrom == "" && sb.State == "running"
		})
		var list []snapJSON
		e.do("GET", "/v1/sandboxes/box/snapshots", e.admin, nil).want(t, 200, "").json(t, &list)
		if !slices.ContainsFunc(list, func(s snapJSON) bool { return s.Reason == "restore" }) {
			t.Fatalf("no snapshot of the state the restore replaced: hostctl did not restore (%+v)", list)
		}
		if got, want := ports("box"), "9000/udp"; got != want {
			t.Fatalf("after the restore: %q, want %q (the ports open before it, not the snapshot's 5432/tcp 27015/udp)", got, want)
		}

		e.do("POST", "/v1/sandboxes/box/fork", e.admin, map[string]any{"name": "copy", "snapshot": "with-db", "count": 2}).want(t, 202, "")
		for _, name := range []string{"copy-1", "copy-2"} {
			if got, want := ports(name), "9000/udp"; got != want {
				t.Fatalf("%s, forked from the snapshot: %q, want the source's %q", name, got, want)
			}
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "tpl", "from": "with-db"}).want(t, 202, "")
		if got := ports("tpl"); got != "" {
			t.Fatalf("a new sandbox from the saved snapshot: %q, want none", got)
		}
	})
}
