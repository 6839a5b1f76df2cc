package desktop

import (
	"froog.tech/froog/names"
	"testing"
)

func TestParseStarted(t *testing.T) {
	tests := []struct {
		out     string
		kind    string
		port    int
		selkies int
	}{
		{`{"kind":"desktop","display":":10","vnc_port":5910}`, names.ViewDesktop, 5910, 0},
		{"{\"kind\":\"browser\",\"vnc_port\":5911}\n", names.ViewBrowser, 5911, 0},
		{`{"kind":"desktop","vnc_port":5910,"transport":"vnc"}`, names.ViewDesktop, 5910, 0},
		{`{"kind":"desktop","vnc_port":5910,"transport":"selkies","selkies_port":6110}`, names.ViewDesktop, 5910, 6110},
		{`{"kind":"desktop","vnc_port":5910,"transport":"vnc","selkies_port":6110}`, names.ViewDesktop, 5910, 0},
		{`{"kind":"desktop","vnc_port":5910,"transport":"selkies"}`, names.ViewDesktop, 0, 0},
		{`{"kind":"desktop","vnc_port":5910,"transport":"selkies","selkies_port":70000}`, names.ViewDesktop, 0, 0},
		{`{"kind":"browser","vnc_port":5911}`, names.ViewDesktop, 0, 0},
		{`{"kind":"desktop","vnc_port":0}`, names.ViewDesktop, 0, 0},
		{`{"kind":"desktop","vnc_port":70000}`, names.ViewDesktop, 0, 0},
		{`not running`, names.ViewDesktop, 0, 0},
		{``, names.ViewDesktop, 0, 0},
	}
	for _, tt := range tests {
		if st, _ := parseStarted([]byte(tt.out), tt.kind); st.AudioPort != 0 {
			t.Errorf("parseStarted(%q) has sound on port %d", tt.out, st.AudioPort)
		}
		st, err := parseStarted([]byte(tt.out), tt.kind)
		if st.VNCPort != tt.port || st.SelkiesPort != tt.selkies || (err == nil) != (tt.port != 0) {
			t.Errorf("parseStarted(%q, %s) = %+v, %v; want %d, %d", tt.out, tt.kind, st, err, tt.port, tt.selkies)
		}
	}
}

// The sound's port where the screen has sound; none where the answer's
// is out of range.
func TestParseStartedSound(t *testing.T) {
	for out, want := range map[string]int{
		`{"kind":"desktop","vnc_port":5910,"audio_port":6210,"pulse_server":"unix:/tmp/.froog-desktop-pulse-10/native"}`: 6210,
		`{"kind":"desktop","vnc_port":5910,"audio_port":70000}`:                                                          0,
		`{"kind":"desktop","vnc_port":5910,"audio_port":-1}`:                                                             0,
	} {
		if st, err := parseStarted([]byte(out), names.ViewDesktop); err != nil || st.AudioPort != want {
			t.Errorf("parseStarted(%q) = %+v, %v; want audio port %d", out, st, err, want)
		}
	}
}

func FuzzParseStarted(f *testing.F) {
	f.Add(`{"kind":"desktop","vnc_port":5910}`)
	f.Add(`{"kind":"desktop","vnc_port":5910,"transport":"selkies","selkies_port":6110}`)
	f.Add(`{"kind":1}`)
	f.Fuzz(func(t *testing.T, out string) {
		st, err := parseStarted([]byte(out), names.ViewDesktop)
		if err == nil && (st.VNCPort < 1 || st.VNCPort > 65535 || st.SelkiesPort < 0 || st.SelkiesPort > 65535 || st.AudioPort < 0 || st.AudioPort > 65535) {
			t.Fatalf("%q: %+v", out, st)
		}
	})
}

func TestStartCommand(t *testing.T) {
	tests := []struct {
		kind, profile string
		browser       bool
		want          string
	}{
		{names.ViewDesktop, "", false, "froog-desktop start --kind desktop"},
		{names.ViewDesktop, "", true, "froog-desktop start --kind desktop --browser"},
		{names.ViewBrowser, "", true, "froog-desktop start --kind browser"}, // the view is a browser already
		{names.ViewBrowser, "/home/u/p", false, "froog-desktop start --kind browser --profile '/home/u/p'"},
		{names.ViewBrowser, "/home/u/it's $(x) `y`", false, `froog-desktop start --kind browser --profile '/home/u/it'\''s $(x) ` + "`y`'"},
		{names.ViewDesktop, "/home/u/p", false, ""},
		{names.ViewBrowser, "/home/u/p\nreboot", false, ""},
		{"wall", "", true, ""},
	}
	for _, tt := range tests {
		got, err := startCommand(tt.kind, tt.profile, tt.browser)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("startCommand(%s, %q, %v) = %q, %v; want %q", tt.kind, tt.profile, tt.browser, got, err, tt.want)
		}
	}
}
