package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"froog.tech/froog/store"
)

// A URL's policy, set by its owner on POST …/urls (issue 30): allow_ips,
// rate_limit, bandwidth_mbit and frame_ancestors. Each member absent
// keeps what the URL has; null (or an empty list) takes it off.

const (
	maxAllowIPs       = 64
	maxFrameAncestors = 16
	maxPerSecond      = 10000
	maxBurst          = 100000
	maxBandwidthMbit  = 10000
)

// urlPolicy is what a request changes of a URL's policy, and of its
// routes (urls_routes.go), which are set and taken off the same way.
type urlPolicy struct {
	setAllow, setRate, setFrame, setRoutes, setBandwidth bool
	allow                                                []netip.Prefix
	rate                                                 *store.RateLimit
	frame                                                []string
	routes                                               []store.PathRoute
	bandwidth                                            int64 // Mbit/s; 0: no cap
}

// parsePolicy reads the policy members of req and its routes (req.Port
// is the URL's port); every problem is a 400 that says what to write
// instead.
func parsePolicy(req *urlRequest) (urlPolicy, error) {
	var p urlPolicy
	var err error
	if req.Routes != nil {
		own := 0
		if req.Port != nil {
			own = *req.Port
		}
		p.setRoutes = true
		if p.routes, err = parseRoutes(req.Routes, own); err != nil {
			return p, err
		}
	}
	if req.AllowIPs != nil {
		p.setAllow = true
		if p.allow, err = parseAllowIPs(req.AllowIPs); err != nil {
			return p, err
		}
	}
	if req.RateLimit != nil {
		p.setRate = true
		if p.rate, err = parseRateLimit(req.RateLimit); err != nil {
			return p, err
		}
	}
	if req.BandwidthMbit != nil {
		p.setBandwidth = true
		if p.bandwidth, err = parseBandwidth(req.BandwidthMbit); err != nil {
			return p, err
		}
	}
	if req.FrameAncestors != nil {
		p.setFrame = true
		if p.frame, err = parseFrameAncestors(req.FrameAncestors); err != nil {
			return p, err
		}
	}
	return p, nil
}

// apply writes p into u, and what changed into the audit event's detail.
func (p *urlPolicy) apply(u *store.URL, detail map[string]string) {
	if p.setAllow {
		u.AllowIPs = p.allow
		detail["allow_ips"] = strconv.Itoa(len(p.allow))
	}
	if p.setRate {
		u.RateLimit = p.rate
		detail["rate_limit"] = "off"
		if p.rate != nil {
			detail["rate_limit"] = strconv.FormatFloat(p.rate.PerSecond, 'g', -1, 64) + "/s burst " + strconv.Itoa(p.rate.Burst)
		}
	}
	if p.setBandwidth {
		u.BandwidthMbit = p.bandwidth
		detail["bandwidth_mbit"] = "off"
		if p.bandwidth > 0 {
			detail["bandwidth_mbit"] = strconv.FormatInt(p.bandwidth, 10)
		}
	}
	if p.setFrame {
		u.FrameAncestors = p.frame
		detail["frame_ancestors"] = strings.Join(p.frame, " ")
	}
	if p.setRoutes {
		u.Routes = p.routes
		var rs []string
		for _, r := range p.routes {
			rs = append(rs, r.Prefix+"="+strconv.Itoa(r.Port))
		}
		detail["routes"] = strings.Join(rs, " ")
	}
}

// stringList reads null or a list of strings (nil for null or []).
func stringList(raw json.RawMessage, what string) ([]string, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("%s must be a list of strings, or null to take it off", what)
	}
	if len(list) == 0 {
		return nil, nil
	}
	return list, nil
}

// parseAllowIPs reads allow_ips: CIDRs or single addresses, IPv4 and
// IPv6, at most maxAllowIPs, kept as their prefixes.
func parseAllowIPs(raw json.RawMessage) ([]netip.Prefix, error) {
	list, err := stringList(raw, "allow_ips")
	if err != nil || list == nil {
		return nil, err
	}
	if len(list) > maxAllowIPs {
		return nil, invalid("allow_ips holds at most %d entries, not %d: join neighbouring addresses into a wider prefix", maxAllowIPs, len(list))
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := parseCIDR(s)
		if err != nil {
			return nil, invalid("allow_ips: %v", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// parseCIDR reads one allow_ips entry: "203.0.113.0/24", "2001:db8::/32",
// or an address alone (one address: /32, /128).
func parseCIDR(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, fmt.Errorf("%q is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return p, fmt.Errorf("%q is not an IP address or a CIDR such as 203.0.113.0/24", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return p, fmt.Errorf("%q is an IPv4-mapped IPv6 prefix: write it as IPv4 (IPv4 clients match IPv4 rules whatever the listener)", s)
	}
	if p.Masked() != p {
		return p, fmt.Errorf("%q has bits set past its /%d: did you mean %s?", s, p.Bits(), p.Masked())
	}
	return p, nil
}

// parseRateLimit reads rate_limit: {"per_second": N, "burst": M}, burst
// defaulting to per_second rounded up.
func parseRateLimit(raw json.RawMessage) (*store.RateLimit, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var req struct {
		PerSecond *float64 `json:"per_second"`
		Burst     *int     `json:"burst"`
	}
	if err := decodeJSON(raw, &req, false); err != nil {
		return nil, invalid(`rate_limit: want {"per_second": 10, "burst": 20} or null`)
	}
	if req.PerSecond == nil || !(*req.PerSecond > 0) || *req.PerSecond > maxPerSecond {
		return nil, invalid("rate_limit.per_second is required: more than 0, at most %d requests a second per client address", maxPerSecond)
	}
	rl := &store.RateLimit{PerSecond: *req.PerSecond, Burst: int(math.Ceil(*req.PerSecond))}
	if req.Burst != nil {
		if *req.Burst < 1 || *req.Burst > maxBurst {
			return nil, invalid("rate_limit.burst must be from 1 to %d", maxBurst)
		}
		rl.Burst = *req.Burst
	}
	return rl, nil
}

// parseBandwidth reads bandwidth_mbit: a whole number of megabits a
// second, or null for no cap.
func parseBandwidth(raw json.RawMessage) (int64, error) {
	if string(raw) == "null" {
		return 0, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil || n < 1 || n > maxBandwidthMbit {
		return 0, invalid("bandwidth_mbit is a whole number of megabits a second from 1 to %d, or null for no cap", maxBandwidthMbit)
	}
	return n, nil
}

// parseFrameAncestors reads frame_ancestors: origins that may frame the
// URL (https://app.example, https://*.example.com, http://localhost:5173)
// and the keywords 'self' and 'none' (alone), lowercased.
func parseFrameAncestors(raw json.RawMessage) ([]string, error) {
	list, err := stringList(raw, "frame_ancestors")
	if err != nil || list == nil {
		return nil, err
	}
	if len(list) > maxFrameAncestors {
		return nil, invalid("frame_ancestors holds at most %d origins, not %d", maxFrameAncestors, len(list))
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		o, err := checkOrigin(s)
		if err != nil {
			return nil, invalid("frame_ancestors: %v", err)
		}
		if o == "'none'" && len(list) > 1 {
			return nil, invalid("frame_ancestors: 'none' stands alone (nobody may frame the URL)")
		}
		out = append(out, o)
	}
	return out, nil
}

// checkOrigin reads one frame_ancestors entry: a keyword, or a scheme
// (http or https), a host (its first label may be *) and an optional
// port; a single trailing slash is dropped, any other path refused.
func checkOrigin(s string) (string, error) {
	bad := fmt.Errorf("%q is not an origin such as https://app.example, https://*.example.com or 'self'", s)
	if len(s) > 300 {
		return "", bad
	}
	o := strings.ToLower(s)
	switch o {
	case "'self'", "'none'":
		return o, nil
	}
	scheme, rest, ok := strings.Cut(o, "://")
	if !ok || (scheme != "https" && scheme != "http") {
		return "", bad
	}
	rest = strings.TrimSuffix(rest, "/")
	host, port, hasPort := strings.Cut(rest, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", bad
		}
	}
	labels := strings.Split(host, ".")
	for i, l := range labels {
		if i == 0 && l == "*" && len(labels) > 1 {
			continue
		}
		if !hostLabel(l) {
			return "", bad
		}
	}
	return scheme + "://" + rest, nil
}

// hostLabel reports whether l is a DNS label: 1-63 of [a-z0-9-], not
// starting or ending with a hyphen.
func hostLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// policyView is a URL's policy as the API shows it.
type policyView struct {
	AllowIPs       []string         `json:"allow_ips"`
	RateLimit      *store.RateLimit `json:"rate_limit,omitempty"`
	BandwidthMbit  int64            `json:"bandwidth_mbit,omitempty"`
	FrameAncestors []string         `json:"frame_ancestors"`
}

func viewPolicy(u *store.URL) policyView {
	v := policyView{AllowIPs: []string{}, RateLimit: u.RateLimit, BandwidthMbit: u.BandwidthMbit, FrameAncestors: []string{}}
	for _, p := range u.AllowIPs {
		v.AllowIPs = append(v.AllowIPs, p.String())
	}
	v.FrameAncestors = append(v.FrameAncestors, u.FrameAncestors...)
	return v
}

// patchURL changes the policy and routes of a URL there is, and nothing
// else: the URL keeps its token, name and the rest (POST …/urls without
// public would host the port again, with a new token).
func (s *Server) patchURL(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	var req struct {
		AllowIPs       json.RawMessage `json:"allow_ips"`
		RateLimit      json.RawMessage `json:"rate_limit"`
		BandwidthMbit  json.RawMessage `json:"bandwidth_mbit"`
		FrameAncestors json.RawMessage `json:"frame_ancestors"`
		Routes         json.RawMessage `json:"routes"`
		Capture        *bool           `json:"capture"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	port, err := portFrom(r)
	if err != nil {
		return err
	}
	policy, err := parsePolicy(&urlRequest{Port: &port, AllowIPs: req.AllowIPs, RateLimit: req.RateLimit, BandwidthMbit: req.BandwidthMbit, FrameAncestors: req.FrameAncestors, Routes: req.Routes})
	if err != nil {
		return err
	}
	sb, old, err := s.urlFor(r)
	if err != nil {
		return err
	}
	now := s.now()
	ev := s.audit(r, "url.update", sb.Name, map[string]string{"port": strconv.Itoa(old.Port)})
	u, err := s.store.PutURL(r.Context(), sb.ID, old.Port, func(cur *store.URL, ev *store.AuditEvent) (store.URL, error) {
		if cur == nil {
			return store.URL{}, errorf(http.StatusNotFound, "not_found", "port %d of %s has no URL", old.Port, sb.Name)
		}
		u := *cur
		policy.apply(&u, ev.Detail)
		setCapture(&u, req.Capture, false, ev.Detail)
		u.UpdatedAt = now
		return u, nil
	}, ev)
	if err != nil {
		return err
	}
	v, err := s.viewURL(&u, k)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
