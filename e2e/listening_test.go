package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// pageShot has Chromium take a picture of u and keeps it as name
// (keep: the artefacts people look at).
func pageShot(t *testing.T, rules, name, u string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	browser.Chromium(t, rules, "--window-size=900,600", "--screenshot="+file, u)
	b, err := os.ReadFile(file)
	if err != nil || len(b) < 2000 {
		t.Fatalf("no screenshot of %s: %v", name, err)
	}
	keep(t, name, b)
}

// portsProblem is the edge's problem+json for a refused port.
type portsProblem struct {
	Type, Title, Detail, Code string
	Status, Port, More        int
	Listening                 *[]int
	Elsewhere                 []string
	Error                     struct{ Code string }
}

// names reports whether p names port among what listens (or among the
// "more" past the ports it names: the host of froogd dev has many).
func (p portsProblem) names(port int) bool {
	if p.Listening == nil {
		return false
	}
	l := *p.Listening
	return slices.Contains(l, port) || p.More > 0 && len(l) > 0 && port > l[len(l)-1]
}

// A URL whose app listens elsewhere, through the real binary: the owner
// (the URL's own token) gets a page (Chromium, screenshot kept) and a
// problem+json naming the listening ports and the address its port
// listens on instead; a stranger gets the private URL's 401 and nothing
// of the ports; a public URL says nothing of them until show_ports is on.
func TestNotListeningNamesPorts(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	c := d.c
	newSandbox(t, c, "ports", 30*time.Second)
	app := serveIn(t, c, "ports", "python3 -m http.server %d --bind 127.0.0.1")
	aside := loopback.FreePort(t)
	body, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.2", aside)})
	c.call("POST", "/v1/sandboxes/ports/jobs", string(body), 201, nil)
	wait.For(t, 30*time.Second, "the app on 127.0.0.2", func() bool {
		conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(aside)))
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	var u struct{ URL, Host string }
	c.call("POST", "/v1/sandboxes/ports/urls", fmt.Sprintf(`{"port": %d}`, aside), 201, &u)
	lu, err := url.Parse(u.URL)
	if err != nil {
		t.Fatal(err)
	}
	token := lu.Query().Get("_token")
	web := d.web(false)
	get := func(host string, headers ...string) portsProblem {
		t.Helper()
		res, b := visit(t, web, "GET", "https://"+host+"/", headers...)
		if res.StatusCode != 502 || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: %d %s %s; want 502 application/problem+json", host, res.StatusCode, res.Header.Get("Content-Type"), b)
		}
		var p portsProblem
		if err := json.Unmarshal([]byte(b), &p); err != nil {
			t.Fatalf("%s: %v: %s", host, err, b)
		}
		if p.Type != "about:blank" || p.Status != 502 || p.Code != "bad_gateway" || p.Error.Code != "bad_gateway" {
			t.Fatalf("%s: not an RFC 9457 problem with the API's code: %s", host, b)
		}
		return p
	}

	p := get(u.Host, "X-Froog-Url-Token", token)
	if !p.names(app) || p.Port != aside || !slices.Equal(p.Elsewhere, []string{"127.0.0.2"}) || !strings.Contains(p.Detail, "listens only on 127.0.0.2") {
		t.Fatalf("the owner: %+v; want port %d listening, %d only on 127.0.0.2", p, app, aside)
	}
	res, b := visit(t, web, "GET", "https://"+u.Host+"/")
	if res.StatusCode != 401 || strings.Contains(b, strconv.Itoa(app)) || strings.Contains(b, "127.0.0.2") || strings.Contains(b, "isten") {
		t.Fatalf("a stranger: %d %s", res.StatusCode, b)
	}

	// In Chromium: the owner's link (redirect, cookie, page), and the
	// stranger's page.
	_, edgePort, _ := net.SplitHostPort(d.edge)
	rules := "MAP *.froog.test 127.0.0.1:" + edgePort
	owner := "https://" + u.Host + "/?_token=" + url.QueryEscape(token)
	dom := browser.Chromium(t, rules, "--dump-dom", owner)
	if !strings.Contains(dom, "<h1>Nothing is listening on "+strconv.Itoa(aside)+"</h1>") || !strings.Contains(dom, "listens only on 127.0.0.2") || !strings.Contains(dom, "Listening: ") {
		t.Fatalf("the owner's page: %s", dom)
	}
	pageShot(t, rules, "not-listening-owner.png", owner)
	dom = browser.Chromium(t, rules, "--dump-dom", "https://"+u.Host+"/")
	if !strings.Contains(dom, "<h1>This URL is private</h1>") || strings.Contains(dom, "isten") {
		t.Fatalf("the stranger's page: %s", dom)
	}
	pageShot(t, rules, "not-listening-stranger.png", "https://"+u.Host+"/")

	// A public URL: nothing of the ports, until its owner turns show_ports on.
	closed := loopback.FreePort(t)
	var pub struct{ Host string }
	c.call("POST", "/v1/sandboxes/ports/urls", fmt.Sprintf(`{"port": %d, "public": true}`, closed), 201, &pub)
	if p := get(pub.Host); p.Listening != nil || p.Elsewhere != nil || strings.Contains(p.Detail, "Listening") {
		t.Fatalf("a public URL without show_ports: %+v", p)
	}
	c.call("POST", "/v1/sandboxes/ports/urls", fmt.Sprintf(`{"port": %d, "public": true, "show_ports": true}`, closed), 200, nil)
	wait.For(t, 10*time.Second, "show_ports on the edge", func() bool { return get(pub.Host).names(app) })
}
