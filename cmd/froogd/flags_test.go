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
