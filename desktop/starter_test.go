package desktop

import "testing"

func TestParseStarted(t *testing.T) {
	tests := []struct {
		out  string
		kind string
		port int
	}{
		{`{"kind":"desktop","display":":10","vnc_port":5910}`, KindDesktop, 5910},
		{"{\"kind\":\"browser\",\"vnc_port\":5911}\n", KindBrowser, 5911},
		{`{"kind":"browser","vnc_port":5911}`, KindDesktop, 0},
		{`{"kind":"desktop","vnc_port":0}`, KindDesktop, 0},
		{`{"kind":"desktop","vnc_port":70000}`, KindDesktop, 0},
		{`not running`, KindDesktop, 0},
		{``, KindDesktop, 0},
	}
	for _, tt := range tests {
		port, err := parseStarted([]byte(tt.out), tt.kind)
		if port != tt.port || (err == nil) != (tt.port != 0) {
			t.Errorf("parseStarted(%q, %s) = %d, %v; want %d", tt.out, tt.kind, port, err, tt.port)
		}
	}
}

func FuzzParseStarted(f *testing.F) {
	f.Add(`{"kind":"desktop","vnc_port":5910}`)
	f.Add(`{"kind":1}`)
	f.Fuzz(func(t *testing.T, out string) {
		if port, err := parseStarted([]byte(out), KindDesktop); err == nil && (port < 1 || port > 65535) {
			t.Fatalf("%q: port %d", out, port)
		}
	})
}

func TestStartCommand(t *testing.T) {
	tests := []struct {
		kind, profile, want string
	}{
		{KindDesktop, "", "froog-desktop start --kind desktop"},
		{KindBrowser, "", "froog-desktop start --kind browser"},
		{KindBrowser, "/home/u/p", "froog-desktop start --kind browser --profile '/home/u/p'"},
		{KindBrowser, "/home/u/it's $(x) `y`", `froog-desktop start --kind browser --profile '/home/u/it'\''s $(x) ` + "`y`'"},
		{KindDesktop, "/home/u/p", ""},
		{KindBrowser, "/home/u/p\nreboot", ""},
		{"wall", "", ""},
	}
	for _, tt := range tests {
		got, err := startCommand(tt.kind, tt.profile)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("startCommand(%s, %q) = %q, %v; want %q", tt.kind, tt.profile, got, err, tt.want)
		}
	}
}
