package edge_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/edge"
)

// View hosts (desktops, walls) go to Options.Views, over both protocols,
// only on a connection made for them.
func TestViewsDispatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	r.host("app-1-kkkkkk", echo(t), true, "")
	views := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "view %s %s", r.Host, r.Proto) })
	addr, _, _ := r.startEdge(r.st, func(o *edge.Options) { o.Views = views })
	view := "desktop--0123456789abcdef." + domain
	for _, h2 := range []bool{false, true} {
		res, b := do(t, r.client(addr, h2), "GET", "https://"+view+"/")
		if res.StatusCode != 200 || !strings.HasPrefix(string(b), "view "+view) {
			t.Fatalf("h2=%v: a view host: %d %s", h2, res.StatusCode, b)
		}
		if res, b := do(t, r.client(addr, h2), "GET", "https://app-1-kkkkkk."+domain+"/"); res.StatusCode != 200 || strings.HasPrefix(string(b), "view") {
			t.Fatalf("h2=%v: a URL host: %d %s", h2, res.StatusCode, b)
		}
	}
	// A request whose Host and SNI disagree about being a view.
	send := func(sni, host string) string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: r.ca.Pool(), ServerName: sni, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return line
	}
	if line := send(view, "app-1-kkkkkk."+domain); !strings.HasPrefix(line, "HTTP/1.1 421") {
		t.Fatalf("SNI a view, Host a URL: %q", line)
	}
	if line := send("app-1-kkkkkk."+domain, view); strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("SNI a URL, Host a view: %q", line)
	}
	if line := send(view, "desktop--1111111111111111."+domain); !strings.HasPrefix(line, "HTTP/1.1 421") {
		t.Fatalf("SNI one view, Host another: %q", line)
	}
}
