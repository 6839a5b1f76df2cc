package names

import (
	"crypto/rand"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RandLen is the length of the random part of a default name.
const RandLen = 6

// Reserved are names under the public domain that froog keeps for itself:
// no URL can take one.
var Reserved = []string{"api", "desktop", "wall", "www", "edge", "admin", "status"}

var subdomainRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$`)

// Errors of CheckSubdomain.
var (
	ErrSubdomainSyntax = errors.New("subdomain must be 3-40 lowercase letters, digits and hyphens, not starting or ending with a hyphen")
	ErrSubdomainTaken  = errors.New("subdomain is reserved")
)

// CheckSubdomain says whether s may be a URL's chosen name.
func CheckSubdomain(s string) error {
	switch {
	case !subdomainRE.MatchString(s):
		return ErrSubdomainSyntax
	case slices.Contains(Reserved, s), IsView(s):
		return ErrSubdomainTaken
	}
	return nil
}

// Views are froog's own hosts for a sandbox's desktop and browser view
// and an account's wall: one host per sandbox (or account) and kind, so
// that one viewer page can never read another's cookies or DOM. Their
// label is KIND--HEX, the hex of the sandbox's (or account's) id: no
// default URL name has that form (NAME-PORT-RAND ends in a port and six
// letters or digits) and CheckSubdomain refuses it.
const (
	ViewDesktop = "desktop"
	ViewBrowser = "browser"
	ViewWall    = "wall"
)

var viewRE = regexp.MustCompile(`^(desktop|browser|wall)--([0-9a-f]{16})$`)

// View is a view host's meaning: its kind, and the id of the sandbox (or,
// for the wall, the account) it shows.
type View struct {
	Kind string
	ID   string
}

// ViewLabel is the host label of a sandbox's (or account's, for the
// wall) view of kind; "" for an id that is not froog's.
func ViewLabel(kind, id string) string {
	_, hex, ok := strings.Cut(id, "_")
	if !ok || !viewRE.MatchString(kind+"--"+hex) || id != viewPrefix(kind)+hex {
		return ""
	}
	return kind + "--" + hex
}

// ParseView reads a label as a view host.
func ParseView(label string) (View, bool) {
	m := viewRE.FindStringSubmatch(label)
	if m == nil {
		return View{}, false
	}
	return View{Kind: m[1], ID: viewPrefix(m[1]) + m[2]}, true
}

// IsView reports whether label has a view host's form.
func IsView(label string) bool { return viewRE.MatchString(label) }

func viewPrefix(kind string) string {
	if kind == ViewWall {
		return "acct_"
	}
	return "sbx_"
}

// NewName makes a default name for a sandbox's port: NAME-PORT-RAND, RAND
// RandLen random lowercase letters and digits.
func NewName(sandbox string, port int) string {
	return sandbox + "-" + strconv.Itoa(port) + "-" + RandomLabel(RandLen)
}

// RandomLabel returns n random lowercase letters and digits.
func RandomLabel(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)] // 256 % 36 = 4: a negligible bias for names
	}
	return string(b)
}

// Label returns the single label of host under domain: host is matched
// case-insensitively, its port ignored, and exactly one label must stand
// before the domain. label is "" when host is not one of ours. It does
// not allocate when host is already lowercase. domain is lowercase.
func Label(host, domain string) (label string) {
	// Strip a port (and the brackets of an IPv6 literal, which is never ours).
	if i := lastColon(host); i >= 0 {
		host = host[:i]
	}
	if n := len(host); n > 0 && host[n-1] == '.' {
		host = host[:n-1]
	}
	if len(host) <= len(domain)+1 || host[len(host)-len(domain)-1] != '.' || !EqualFold(host[len(host)-len(domain):], domain) {
		return ""
	}
	label = host[:len(host)-len(domain)-1]
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case c >= 'A' && c <= 'Z':
			return lower(label)
		default:
			return "" // a dot (two labels), or a byte no host name has
		}
	}
	return label
}

// SplitHostPort splits a Host header into the host and the port, if any.
// The port must be 1 to 5 digits: anything else there (a "@", a path) is
// refused, so that the host the edge repeats in redirects and
// X-Forwarded-Host is only ever a name and a number.
func SplitHostPort(host string) (name, port string, ok bool) {
	i := lastColon(host)
	if i < 0 {
		return host, "", host != ""
	}
	name, port = host[:i], host[i+1:]
	if len(port) == 0 || len(port) > 5 || name == "" {
		return "", "", false
	}
	for j := 0; j < len(port); j++ {
		if port[j] < '0' || port[j] > '9' {
			return "", "", false
		}
	}
	return name, port, true
}

// lastColon finds the colon of a port, outside an IPv6 literal.
func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ':':
			return i
		case ']':
			return -1
		}
	}
	return -1
}

// EqualFold reports whether a equals lower, a lowercase string, ignoring
// ASCII case.
func EqualFold(a, lower string) bool {
	if len(a) != len(lower) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x := a[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != lower[i] {
			return false
		}
	}
	return true
}

// lower lowercases a label of letters, digits and hyphens, rejecting
// anything else.
func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		default:
			return ""
		}
	}
	return string(b)
}

// ValidDomain says whether d can be the public-URL domain: a name of two
// or more labels (froogusercontent.com), with no port, path, space, or
// leading or trailing dot.
func ValidDomain(d string) bool {
	return d != "" && !strings.ContainsAny(d, "/: ") && !strings.HasPrefix(d, ".") && !strings.HasSuffix(d, ".") && strings.Contains(d, ".")
}

// Host is the host name of a label under domain.
func Host(label, domain string) string { return label + "." + domain }

// HostURL is the address of a host label under domain, with the HTTPS
// port visitors reach it on (none for 0 or 443).
func HostURL(label, domain string, port int) string {
	host := Host(label, domain)
	if port != 0 && port != 443 {
		host += ":" + strconv.Itoa(port)
	}
	return "https://" + host + "/"
}
