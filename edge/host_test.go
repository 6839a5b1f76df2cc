package edge

import (
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
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
		if got := parseHost(tt.host, "froog.test"); got != tt.want {
			t.Errorf("parseHost(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

func TestParseHostAllocatesNothing(t *testing.T) {
	var sink string
	if n := testing.AllocsPerRun(100, func() { sink = parseHost("my-box-3000-k7f2qx.froog.test:8443", "froog.test") }); n != 0 {
		t.Fatalf("%v allocations per parse, want 0", n)
	}
	_ = sink
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"a.froog.test", "A-B.FROOG.TEST:1", "x.y.froog.test", "[::1]:80", "froog.test", "é.froog.test", "a.froog.test."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		label := parseHost(host, "froog.test")
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

func BenchmarkParseHost(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		parseHost("my-box-3000-k7f2qx.froog.test:8443", "froog.test")
	}
}
