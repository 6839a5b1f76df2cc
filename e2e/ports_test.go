package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// openPorts is what a ports route answers.
type openPorts struct {
	Ports []struct {
		Port      int
		Protocol  string
		Open      bool
		PublicURL bool `json:"public_url"`
	}
	IPv6 *string `json:"ipv6"`
	Max  int
}

func (p openPorts) String() string {
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

// The ports routes through the real binary (froogd dev: the local
// driver, which keeps and lists ports and has no IPv6 address or
// firewall): each answer checked against the OpenAPI document by the
// client; a public URL's port in the list; the limit's and the scope's
// refusals; the ports kept across a stop and start, and copied by a fork.
func TestPorts(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	c := d.c
	newSandbox(t, c, "game", 60*time.Second)
	var p openPorts
	c.call("POST", "/v1/sandboxes/game/ports", `{"port": 27015, "protocol": "udp"}`, 200, &p)
	c.call("POST", "/v1/sandboxes/game/ports", `{"port": 5432}`, 200, &p)
	c.call("POST", "/v1/sandboxes/game/urls", `{"port": 3000, "public": true}`, 201, nil)
	c.call("GET", "/v1/sandboxes/game/ports", "", 200, &p)
	if want := "3000/tcp+url! 5432/tcp 27015/udp"; p.String() != want || p.Max != 64 || p.IPv6 != nil {
		t.Fatalf("ports: %q (max %d, ipv6 %v), want %q, 64, null under the local driver", p, p.Max, p.IPv6, want)
	}
	c.call("DELETE", "/v1/sandboxes/game/ports/3000/tcp", "", 409, nil)
	c.call("DELETE", "/v1/sandboxes/game/ports/5432/udp", "", 404, nil)
	c.call("POST", "/v1/sandboxes/game/ports", `{"port": 70000}`, 400, nil)
	c.call("PUT", "/v1/sandboxes/game/ports", `{"ports": [{"port": 1, "protocol": "icmp"}]}`, 400, nil)
	var many []string
	for i := 1; i <= 64; i++ {
		many = append(many, fmt.Sprintf(`{"port": %d, "protocol": "udp"}`, i))
	}
	c.call("PUT", "/v1/sandboxes/game/ports", `{"ports": [`+strings.Join(many, ",")+`]}`, 409, nil) // 64 and the URL's
	c.call("DELETE", "/v1/sandboxes/game/ports/5432/tcp", "", 200, &p)
	if want := "3000/tcp+url! 27015/udp"; p.String() != want {
		t.Fatalf("after closing 5432: %q, want %q", p, want)
	}

	var ro struct{ Key string }
	c.call("POST", "/v1/api-keys", `{"label": "watcher", "preset": "read-only"}`, 201, &ro)
	watcher := client{t: t, base: c.base, key: ro.Key}
	watcher.call("GET", "/v1/sandboxes/game/ports", "", 200, nil)
	watcher.call("POST", "/v1/sandboxes/game/ports", `{"port": 80}`, 403, nil)
	watcher.call("DELETE", "/v1/sandboxes/game/ports/27015/udp", "", 403, nil)

	c.call("POST", "/v1/sandboxes/game/stop", "", 202, nil)
	wait.For(t, 30*time.Second, "game stops", func() bool {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/game", "", 200, &sb)
		return sb.State == "stopped"
	})
	c.call("POST", "/v1/sandboxes/game/start", "", 202, nil)
	runsWithin(t, c, "game", 60*time.Second)
	c.call("GET", "/v1/sandboxes/game/ports", "", 200, &p)
	if want := "3000/tcp+url! 27015/udp"; p.String() != want {
		t.Fatalf("after a stop and start: %q, want %q", p, want)
	}
	c.call("POST", "/v1/sandboxes/game/fork", `{"name": "game-2"}`, 202, nil)
	c.call("GET", "/v1/sandboxes/game-2/ports", "", 200, &p)
	if want := "27015/udp"; p.String() != want {
		t.Fatalf("the fork's ports: %q, want %q (its own, not the source's URLs')", p, want)
	}
}

// froog port open, list and close through the froog binary.
func TestCLIPorts(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	froog := newCLI(t)
	froog.login(t, d)
	froog.ok(t, "new", "box")
	if out := froog.ok(t, "port", "open", "box", "27015/udp"); out != "27015/udp open" {
		t.Fatalf("port open: %q", out)
	}
	froog.ok(t, "port", "open", "box", "5432")
	froog.ok(t, "host", "box", "3000", "--public")
	list := froog.ok(t, "port", "list", "box")
	for _, want := range []string{"3000/tcp   public URL", "5432/tcp   port open", "27015/udp  port open"} {
		if !strings.Contains(list, want) {
			t.Fatalf("port list lacks %q:\n%s", want, list)
		}
	}
	if _, errOut, code := froog.run(t, "", "port", "close", "box", "3000"); code != 1 || !strings.Contains(errOut, "409 port_from_url") {
		t.Fatalf("close a public URL's port: exit %d: %s", code, errOut)
	}
	if _, errOut, code := froog.run(t, "", "port", "open", "box", "80/sctp"); code != 1 || !strings.Contains(errOut, "80/sctp") {
		t.Fatalf("open 80/sctp: exit %d: %s", code, errOut)
	}
	if out := froog.ok(t, "port", "close", "box", "27015/udp"); out != "27015/udp closed" {
		t.Fatalf("port close: %q", out)
	}
	if list := froog.ok(t, "port", "list", "box"); strings.Contains(list, "27015") {
		t.Fatalf("port list after close:\n%s", list)
	}
}
