package main

import (
	"io"
	"strings"
	"testing"
)

// A flag's environment form sets its default; a value that is not of the
// flag's kind is an error naming the variable, and the flag keeps its
// default.
func TestFlagsFromEnvironment(t *testing.T) {
	tests := []struct {
		env, value string
		wantNum    int
		wantBool   bool
		wantErr    string
	}{
		{"", "", 30, true, ""},
		{"FROOG_DESKTOP_BROWSER", "false", 30, false, ""},
		{"FROOG_DESKTOP_BROWSER", "0", 30, false, ""},
		{"FROOG_DESKTOP_BROWSER", "yes", 30, true, "FROOG_DESKTOP_BROWSER=\"yes\": want true or false"},
		{"FROOG_DRAIN_SECS", "12", 12, true, ""},
		{"FROOG_DRAIN_SECS", "twelve", 30, true, "FROOG_DRAIN_SECS=\"twelve\": want a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv(tt.env, tt.value)
			}
			f := newFlags("test", io.Discard)
			var n int
			var b bool
			f.num(&n, "drain-secs", 30, "")
			f.boolean(&b, "desktop-browser", true, "")
			err := f.parse(nil)
			if n != tt.wantNum || b != tt.wantBool || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%d %v %v; want %d %v %q", n, b, err, tt.wantNum, tt.wantBool, tt.wantErr)
			}
		})
	}
	// The flag wins over the environment.
	t.Setenv("FROOG_DESKTOP_BROWSER", "false")
	f := newFlags("test", io.Discard)
	var b bool
	f.boolean(&b, "desktop-browser", true, "")
	if err := f.parse([]string{"--desktop-browser=true"}); err != nil || !b {
		t.Errorf("--desktop-browser=true over the environment's false: %v %v", b, err)
	}
}

// The tunnel's keepalive and the edge's upstream idle time are 1 second
// or more, in every role that has them; a bad one is named.
func TestTimingFlagsRefuseZero(t *testing.T) {
	tests := []struct {
		role string
		c    config
		flag string
	}{
		{"edge", &edgeConfig{}, "--tunnel-keepalive-secs"},
		{"api", &apiConfig{}, "--tunnel-keepalive-secs"},
		{"hostctl", &hostctlConfig{}, "--tunnel-keepalive-secs"},
		{"dev", &devConfig{}, "--tunnel-keepalive-secs"},
		{"edge", &edgeConfig{}, "--upstream-idle-secs"},
		{"dev", &devConfig{}, "--upstream-idle-secs"},
	}
	for _, tt := range tests {
		for _, v := range []string{"0", "-1", "2"} {
			err := parseConfig(tt.role, tt.c, []string{tt.flag, v}, io.Discard)
			named := err != nil && strings.Contains(err.Error(), tt.flag+" "+v+": want 1 or more")
			if named != (v != "2") {
				t.Errorf("froogd %s %s %s: %v", tt.role, tt.flag, v, err)
			}
		}
	}
}
