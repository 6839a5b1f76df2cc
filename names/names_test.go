package names

import (
	"regexp"
	"strings"
	"testing"
)

func TestLabel(t *testing.T) {
	tests := []struct{ host, want string }{
		{"my-box-3000-k7f2qx.froog.test", "my-box-3000-k7f2qx"},
		{"My-Box-3000-K7F2QX.FROOG.TEST", "my-box-3000-k7f2qx"},
		{"acme-demo.froog.test:8443", "acme-demo"},
		{"acme-demo.froog.test.", "acme-demo"},
		{"acme-demo.froog.test.:443", "acme-demo"},
		{"froog.test", ""},
		{".froog.test", ""},
		{"a.b.froog.test", ""},
		{"box.froog.test.evil.com", ""},
		{"boxfroog.test", ""},
		{"box.other.test", ""},
		{"box_1.froog.test", ""},
		{"bo x.froog.test", ""},
		{"[::1]:443", ""},
		{"", ""},
		{":443", ""},
	}
	for _, tt := range tests {
		if got := Label(tt.host, "froog.test"); got != tt.want {
			t.Errorf("Label(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

func TestLabelAllocatesNothing(t *testing.T) {
	var sink string
	if n := testing.AllocsPerRun(100, func() { sink = Label("my-box-3000-k7f2qx.froog.test:8443", "froog.test") }); n != 0 {
		t.Fatalf("%v allocations per parse, want 0", n)
	}
	_ = sink
}

func FuzzLabel(f *testing.F) {
	for _, s := range []string{"a.froog.test", "A-B.FROOG.TEST:1", "x.y.froog.test", "[::1]:80", "froog.test", "é.froog.test", "a.froog.test."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		label := Label(host, "froog.test")
		if label == "" {
			return
		}
		// What it accepts is one lowercase label that, with the domain,
		// is the host it was given.
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				t.Fatalf("%q: label %q has %q", host, label, c)
			}
		}
		h := strings.ToLower(host)
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		if strings.TrimSuffix(h, ".") != label+".froog.test" {
			t.Fatalf("%q: label %q is not the host's", host, label)
		}
	})
}

func TestSplitHostPort(t *testing.T) {
	tests := []struct {
		host, name, port string
		ok               bool
	}{
		{"a.froog.test", "a.froog.test", "", true},
		{"a.froog.test:8443", "a.froog.test", "8443", true},
		{"a.froog.test:@evil.example", "", "", false},
		{"a.froog.test:", "", "", false},
		{"a.froog.test:123456", "", "", false},
		{"a.froog.test:80/x", "", "", false},
		{":443", "", "", false},
		{"", "", "", false},
		{"[::1]:443", "[::1]", "443", true},
	}
	for _, tt := range tests {
		name, port, ok := SplitHostPort(tt.host)
		if name != tt.name || port != tt.port || ok != tt.ok {
			t.Errorf("SplitHostPort(%q) = %q, %q, %v", tt.host, name, port, ok)
		}
	}
}

func TestNames(t *testing.T) {
	n := NewName("my-box", 3000)
	if !regexp.MustCompile(`^my-box-3000-[a-z0-9]{6}$`).MatchString(n) {
		t.Fatalf("NewName: %q", n)
	}
	for s, want := range map[string]error{"acme-demo": nil, "ab": ErrSubdomainSyntax, "-ab": ErrSubdomainSyntax, "Abc": ErrSubdomainSyntax,
		strings.Repeat("a", 41): ErrSubdomainSyntax, "desktop": ErrSubdomainTaken, "wall": ErrSubdomainTaken} {
		if got := CheckSubdomain(s); got != want {
			t.Errorf("CheckSubdomain(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestViews(t *testing.T) {
	l := ViewLabel(ViewDesktop, "sbx_0123456789abcdef")
	if l != "desktop--0123456789abcdef" {
		t.Fatalf("ViewLabel: %q", l)
	}
	if v, ok := ParseView(l); !ok || v != (View{ViewDesktop, "sbx_0123456789abcdef"}) {
		t.Fatalf("ParseView(%q) = %+v, %v", l, v, ok)
	}
	if v, ok := ParseView("wall--00000000000000ff"); !ok || v.ID != "acct_00000000000000ff" {
		t.Fatalf("wall: %+v", v)
	}
	for _, bad := range []string{"desktop--0123", "desktop-0123456789abcdef", "shell--0123456789abcdef", "desktop--0123456789ABCDEF", ""} {
		if _, ok := ParseView(bad); ok {
			t.Errorf("ParseView(%q) accepted", bad)
		}
	}
	for _, bad := range [][2]string{{ViewDesktop, "acct_0123456789abcdef"}, {ViewWall, "sbx_0123456789abcdef"}, {"x", "sbx_0123456789abcdef"}, {ViewDesktop, "sbx_01"}} {
		if l := ViewLabel(bad[0], bad[1]); l != "" {
			t.Errorf("ViewLabel(%q, %q) = %q", bad[0], bad[1], l)
		}
	}
	// No URL can take a view's name, chosen or default.
	if CheckSubdomain(l) != ErrSubdomainTaken {
		t.Fatal("a subdomain took a view's name")
	}
	for range 100 {
		if IsView(NewName("desktop-", 3000)) || IsView(NewName("desktop", 1)) {
			t.Fatal("a default name has a view's form")
		}
	}
}

func TestValidDomain(t *testing.T) {
	for _, tc := range []struct {
		d    string
		want bool
	}{
		{"froogusercontent.com", true},
		{"froog.localhost", true},
		{"a.b.c", true},
		{"", false},
		{"localhost", false},
		{".froog.test", false},
		{"froog.test.", false},
		{"froog.test:443", false},
		{"froog.test/x", false},
		{"froog .test", false},
	} {
		if got := ValidDomain(tc.d); got != tc.want {
			t.Errorf("ValidDomain(%q): got %v, want %v", tc.d, got, tc.want)
		}
	}
}

func TestHostURL(t *testing.T) {
	tests := []struct {
		label, domain string
		port          int
		want          string
	}{
		{"my-box-3000-k7f2qx", "froog.test", 0, "https://my-box-3000-k7f2qx.froog.test/"},
		{"acme-demo", "froog.test", 443, "https://acme-demo.froog.test/"},
		{"desktop--00000000000000ff", "froog.test", 8443, "https://desktop--00000000000000ff.froog.test:8443/"},
	}
	for _, tt := range tests {
		if got := HostURL(tt.label, tt.domain, tt.port); got != tt.want {
			t.Errorf("HostURL(%q, %q, %d): got %q, want %q", tt.label, tt.domain, tt.port, got, tt.want)
		}
		if got, want := Label(Host(tt.label, tt.domain), tt.domain), tt.label; got != want {
			t.Errorf("Label(Host(%q, %q)): got %q, want %q", tt.label, tt.domain, got, want)
		}
	}
}
