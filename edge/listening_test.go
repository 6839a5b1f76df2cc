package edge_test

import (
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/store"
)

// notListening is what a client reads of the edge's answer when its
// URL's port has no app.
type notListening struct {
	Type, Title, Detail, Code string
	Status, Port, More        int
	Listening                 *[]int
	Elsewhere                 []string
	Error                     struct{ Code string }
}

func getProblem(t *testing.T, r *rig, url string, headers ...string) notListening {
	t.Helper()
	res, b := do(t, r.client(r.addr, false), "GET", url, headers...)
	if res.StatusCode != 502 || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("GET %s: %d %s %s; want 502 application/problem+json", url, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	var p notListening
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
	if p.Type != "about:blank" || p.Status != 502 || p.Title != "Bad Gateway" || p.Code != "bad_gateway" || p.Error.Code != "bad_gateway" {
		t.Fatalf("GET %s: not an RFC 9457 problem with the API's code: %s", url, b)
	}
	return p
}

// lists reports whether p names port among what listens, or among the
// "more" past the ports it names (a busy host has many).
func lists(p notListening, port int) bool {
	if p.Listening == nil {
		return false
	}
	l := *p.Listening
	return slices.Contains(l, port) || p.More > 0 && len(l) > 0 && port > l[len(l)-1]
}

// A refused dial says what listens instead: to the holder of a private
// URL's own token, and on any URL once show_ports is on; a viewer token's
// holder, a public URL's visitor without show_ports and a stranger learn
// nothing of it.
func TestNotListeningSaysWhatIs(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	app := echo(t) // the app, on another port than the URL's
	aside, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer aside.Close()
	asidePort := aside.Addr().(*net.TCPAddr).Port
	u := r.host("priv-1-pppppp", asidePort, false, "pt_owner")
	viewer := "pvt_viewer"
	if _, err := r.st.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: store.HashSecret(viewer), CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}, nil); err != nil {
		t.Fatal(err)
	}
	url := "https://priv-1-pppppp." + domain + "/"
	eventually(t, "the viewer token opens the URL", func() bool {
		res, _ := do(t, r.client(r.addr, false), "GET", url, "X-Froog-Url-Token", viewer)
		return res.StatusCode == 502
	})

	p := getProblem(t, r, url, "X-Froog-Url-Token", "pt_owner")
	if !lists(p, app) || p.Port != asidePort {
		t.Fatalf("the owner: listening %v, port %d; want %d among them, port %d", p.Listening, p.Port, app, asidePort)
	}
	if !slices.Equal(p.Elsewhere, []string{"127.0.0.2"}) || !strings.Contains(p.Detail, "listens only on 127.0.0.2") || !strings.Contains(p.Detail, "Listening: ") {
		t.Fatalf("the owner: elsewhere %v, detail %q; want 127.0.0.2 and the ports", p.Elsewhere, p.Detail)
	}
	// A browser: the page says it too.
	res, page := do(t, r.client(r.addr, true), "GET", url, "X-Froog-Url-Token", "pt_owner", "Sec-Fetch-Mode", "navigate")
	if res.StatusCode != 502 || !strings.Contains(string(page), "<h1>Nothing is listening on "+strconv.Itoa(asidePort)+"</h1>") || !strings.Contains(string(page), "Listening: ") {
		t.Fatalf("the owner's page: %d %s", res.StatusCode, page)
	}
	if p := getProblem(t, r, url, "X-Froog-Url-Token", viewer); p.Listening != nil || p.Elsewhere != nil || strings.Contains(p.Detail, "Listening") {
		t.Fatalf("a viewer token learnt what listens: %+v", p)
	}
	// A stranger is refused before anything is read, as ever.
	res, b := do(t, r.client(r.addr, false), "GET", url)
	if res.StatusCode != 401 || strings.Contains(string(b), strconv.Itoa(app)) || strings.Contains(string(b), "listen") {
		t.Fatalf("a stranger: %d %s", res.StatusCode, b)
	}

	// A public URL: nothing, until its owner turns show_ports on.
	closed := loopback.FreePort(t)
	r.host("pub-1-qqqqqq", closed, true, "")
	pub := "https://pub-1-qqqqqq." + domain + "/"
	if p := getProblem(t, r, pub); p.Listening != nil || p.Port != closed {
		t.Fatalf("a public URL without show_ports: %+v", p)
	}
	if _, err := r.st.PutURL(ctx, r.sb.ID, closed, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.ShowPorts = true
		return u, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "show_ports reaches the edge", func() bool {
		p := getProblem(t, r, pub)
		return lists(p, app) && p.Elsewhere == nil
	})
}
