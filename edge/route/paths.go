package route

import (
	"slices"
	"strings"

	"froog.tech/froog/store"
)

// A composite URL: path prefixes sent to other ports of its sandbox
// (store.URL.Routes). Where a rule of the edge is a path prefix (a
// route, a webhook inbox's), it is matched on the path as the client
// sent it, byte for byte ("/%61pi/" is not "/api/"), while an app reads
// the path decoded and resolved (AppPath). A path the two readings put
// on different sides of a prefix is one the rule must not decide
// alone: a route selects its port only for a path both put under its
// prefix ("/api/../x", "/api/%2e%2e/x", "/api/..;/x", "/api/..%2fx" go
// to the URL's own port), and an inbox refuses one they disagree on
// (Ambiguous; edge/inbox.go).

// pathRoute is one prefix and its port.
type pathRoute struct {
	prefix string
	port   int
}

// newPaths is u's routes, the longest prefix first (the most specific
// wins); nil when it has none. What the API refuses is skipped.
func newPaths(u *store.URL) []pathRoute {
	var out []pathRoute
	for _, r := range u.Routes {
		if r.Port < 1 || r.Port > 65535 || r.Port == u.Port || len(r.Prefix) < 1 || r.Prefix[0] != '/' || r.Prefix[len(r.Prefix)-1] != '/' || AppPath(r.Prefix) != r.Prefix {
			continue
		}
		out = append(out, pathRoute{prefix: r.Prefix, port: r.Port})
	}
	slices.SortStableFunc(out, func(a, b pathRoute) int { return len(b.prefix) - len(a.prefix) })
	return out
}

// PortFor is the port of the sandbox a request for path (raw, as sent,
// without the query) goes to: the longest of the URL's prefixes it is
// under both as sent and as an app reads it, else the URL's own.
func (rt *Route) PortFor(path string) int {
	if len(rt.paths) == 0 {
		return rt.Port
	}
	app := "" // AppPath(path), once a prefix holds the path as sent
	for _, p := range rt.paths {
		if !strings.HasPrefix(path, p.prefix) {
			continue
		}
		if app == "" {
			app = AppPath(path)
		}
		if strings.HasPrefix(app, p.prefix) {
			return p.port
		}
	}
	return rt.Port
}

// Ambiguous reports whether path (raw, as sent) is under prefix as sent
// but not as an app reads it, or the other way round.
func Ambiguous(path, prefix string) bool {
	return strings.HasPrefix(path, prefix) != strings.HasPrefix(AppPath(path), AppPath(prefix))
}

// AppPath is path as an app may read it: percent-decoded, a backslash
// as a slash, each segment without its ";" parameters, and empty, "."
// and ".." segments resolved; a final "/" (or dot segment) stays a
// final "/". A path with none of these is itself, and costs nothing.
func AppPath(path string) string {
	if !strings.ContainsAny(path, "%\\;") && !strings.Contains(path, "//") && !strings.Contains(path, "/.") {
		return path
	}
	b := make([]byte, 0, len(path))
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '%' && i+2 < len(path) && isHex(path[i+1]) && isHex(path[i+2]) {
			c, i = unhex(path[i+1])<<4|unhex(path[i+2]), i+2
		}
		if c == '\\' {
			c = '/'
		}
		b = append(b, c)
	}
	parts := strings.Split(string(b), "/")
	segs := make([]string, 0, len(parts))
	for _, seg := range parts {
		switch seg, _, _ = strings.Cut(seg, ";"); seg {
		case "", ".":
		case "..":
			segs = segs[:max(len(segs)-1, 0)]
		default:
			segs = append(segs, seg)
		}
	}
	out := "/" + strings.Join(segs, "/")
	if last, _, _ := strings.Cut(parts[len(parts)-1], ";"); len(segs) > 0 && (last == "" || last == "." || last == "..") {
		out += "/"
	}
	return out
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
