package api

import (
	"encoding/json"
	"strconv"
	"strings"

	"froog.tech/froog/store"
)

// A composite URL (issue 30): routes send the paths under a prefix to
// another port of the same sandbox, behind the URL's one origin, token
// and policy. The edge matches the prefix on the path as sent, byte for
// byte, the longest first, and forwards the path whole (edge/route).

const (
	maxRoutes      = 8
	maxRoutePrefix = 128
)

// parseRoutes reads routes: [{"prefix": "/api/", "port": 8000}, …],
// null or [] for none. own is the URL's port, which no route may name.
func parseRoutes(raw json.RawMessage, own int) ([]store.PathRoute, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid(`routes must be a list such as [{"prefix": "/api/", "port": 8000}], or null to take them off`)
	}
	if len(list) == 0 {
		return nil, nil
	}
	if len(list) > maxRoutes {
		return nil, invalid("routes holds at most %d prefixes, not %d", maxRoutes, len(list))
	}
	out := make([]store.PathRoute, 0, len(list))
	for _, item := range list {
		var r struct {
			Prefix *string `json:"prefix"`
			Port   *int    `json:"port"`
		}
		if err := decodeJSON(item, &r, false); err != nil || r.Prefix == nil || r.Port == nil {
			return nil, invalid(`routes: each is {"prefix": "/api/", "port": 8000}`)
		}
		if err := checkPrefix(*r.Prefix); err != "" {
			return nil, invalid("routes: prefix %s: %s", strconv.Quote(*r.Prefix), err)
		}
		switch p := *r.Port; {
		case p < 1 || p > 65535:
			return nil, invalid("routes: the port of %s must be from 1 to 65535", *r.Prefix)
		case p == own:
			return nil, invalid("routes: %s goes to %d, the URL's own port, which serves every path no route takes: leave it out", *r.Prefix, p)
		}
		for _, o := range out {
			if o.Prefix == *r.Prefix {
				return nil, invalid("routes: prefix %s appears twice", *r.Prefix)
			}
		}
		out = append(out, store.PathRoute{Prefix: *r.Prefix, Port: *r.Port})
	}
	return out, nil
}

// checkPrefix says what is wrong with a route's prefix, or "": it starts
// and ends with '/', is at most maxRoutePrefix bytes of printable ASCII,
// and has nothing an app could read another way (no "..", '%', "//",
// ';', '?', '#', '\'): the edge takes a prefix only when an app reads
// it as it is written (route.AppPath).
func checkPrefix(p string) string {
	switch {
	case len(p) > maxRoutePrefix:
		return "at most " + strconv.Itoa(maxRoutePrefix) + " bytes"
	case len(p) < 1 || p[0] != '/' || p[len(p)-1] != '/':
		return "must start and end with / (such as /api/): it matches the paths under it"
	case strings.Contains(p, ".."), strings.Contains(p, "//"), strings.ContainsAny(p, "%;?#\\"):
		return "must be a plain path: no .., //, %, ;, ?, # or \\ (it is matched byte for byte on the path as sent)"
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f {
			return "must be printable ASCII, no spaces: percent-encoded paths are not matched"
		}
	}
	for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
		if seg == "." {
			return "must be a plain path: no . segment"
		}
	}
	return ""
}

// routeView is one route as the API shows it.
type routeView struct {
	Prefix string `json:"prefix"`
	Port   int    `json:"port"`
}

func viewRoutes(u *store.URL) []routeView {
	v := make([]routeView, 0, len(u.Routes))
	for _, r := range u.Routes {
		v = append(v, routeView(r))
	}
	return v
}
