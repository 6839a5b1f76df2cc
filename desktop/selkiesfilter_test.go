package desktop

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFilterSelkies(t *testing.T) {
	const text, binary = selkiesMsgText, selkiesMsgBinary
	for _, c := range []struct {
		name     string
		viewOnly bool
		typ      int
		in       string
		out      string // "" with ok false: dropped
		ok       bool
	}{
		// A session with input forwards everything as it is.
		{"controller key", false, text, "kd,65", "kd,65", true},
		{"controller mouse", false, text, "m,10,20,1,0", "m,10,20,1,0", true},
		{"controller clipboard", false, text, "cw,aGk=", "cw,aGk=", true},
		{"controller settings", false, text, `SETTINGS,{"encoder":"jpeg"}`, `SETTINGS,{"encoder":"jpeg"}`, true},
		{"controller mic", false, binary, "\x02pcm", "\x02pcm", true},
		{"controller gzip", false, binary, "\x05gz", "\x05gz", true},
		{"controller other type", false, 9, "x", "", false},

		// A watcher: what it needs, exactly.
		{"keyframe", true, text, "REQUEST_KEYFRAME", "REQUEST_KEYFRAME", true},
		{"start video", true, text, "START_VIDEO", "START_VIDEO", true},
		{"stop video", true, text, "STOP_VIDEO", "STOP_VIDEO", true},
		{"gzip capability", true, text, "_gz,1", "", false}, // gzip'd text from Selkies could carry the clipboard
		{"ack", true, text, "CLIENT_FRAME_ACK 42", "CLIENT_FRAME_ACK 42", true},
		{"ack zero", true, text, "CLIENT_FRAME_ACK 0", "CLIENT_FRAME_ACK 0", true},
		{"ack max", true, text, "CLIENT_FRAME_ACK 65535", "CLIENT_FRAME_ACK 65535", true},
		{"settings replaced", true, text, `SETTINGS,{"displayId":"primary","encoder":"jpeg","manual_width":8000}`, watcherSettings, true},
		{"settings empty", true, text, "SETTINGS,", watcherSettings, true},

		// A watcher: input, clipboard, control and anything odd.
		{"key down", true, text, "kd,65", "", false},
		{"key up", true, text, "ku,65", "", false},
		{"key reset", true, text, "kr", "", false},
		{"key heartbeat", true, text, "kh,65", "", false},
		{"mouse", true, text, "m,10,20,1,0", "", false},
		{"mouse relative", true, text, "m2,1,1,0,0", "", false},
		{"typed text", true, text, "co,end,x", "", false},
		{"gamepad", true, text, "js,b,0,1,1", "", false},
		{"clipboard write", true, text, "cw,aGk=", "", false},
		{"clipboard read", true, text, "cr", "", false},
		{"clipboard request", true, text, "REQUEST_CLIPBOARD", "", false},
		{"command", true, text, "cmd,xterm", "", false},
		{"resize", true, text, "r,1920x1080,primary", "", false},
		{"scaling", true, text, "s,2", "", false},
		{"bitrate", true, text, "vb,9000", "", false},
		{"start audio", true, text, "START_AUDIO", "", false},
		{"keyframe with more", true, text, "REQUEST_KEYFRAME,kd,65", "", false},
		{"keyframe lower case", true, text, "request_keyframe", "", false},
		{"settings without comma", true, text, "SETTINGS", "", false},
		{"settings too long", true, text, "SETTINGS," + strings.Repeat("x", maxWatcherMessage), "", false},
		{"ack negative", true, text, "CLIENT_FRAME_ACK -1", "", false},
		{"ack too big", true, text, "CLIENT_FRAME_ACK 65536", "", false},
		{"ack leading zero", true, text, "CLIENT_FRAME_ACK 042", "", false},
		{"ack two", true, text, "CLIENT_FRAME_ACK 1 2", "", false},
		{"ack empty", true, text, "CLIENT_FRAME_ACK ", "", false},
		{"ack comma", true, text, "CLIENT_FRAME_ACK,1", "", false},
		{"empty", true, text, "", "", false},
		{"binary keyframe", true, binary, "REQUEST_KEYFRAME", "", false},
		{"binary gzip", true, binary, "\x05\x1f\x8b", "", false},
		{"binary mic", true, binary, "\x02pcm", "", false},
		{"binary empty", true, binary, "", "", false},
		{"other type", true, 9, "REQUEST_KEYFRAME", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, ok := FilterSelkies(c.viewOnly, c.typ, []byte(c.in))
			if ok != c.ok || string(out) != c.out {
				t.Errorf("FilterSelkies(%v, %d, %q) = %q, %v; want %q, %v", c.viewOnly, c.typ, c.in, out, ok, c.out, c.ok)
			}
		})
	}
}

// watcherForms are the only messages a view-only session may send on.
func watcherMayForward(m string) bool {
	switch {
	case m == "REQUEST_KEYFRAME", m == "START_VIDEO", m == "STOP_VIDEO", m == watcherSettings:
		return true
	case strings.HasPrefix(m, "CLIENT_FRAME_ACK "):
		return frameID(m[len("CLIENT_FRAME_ACK "):])
	}
	return false
}

// Whatever a view-only page sends, only a watcher's messages reach
// Selkies, and a session with input gets its message through unchanged.
func FuzzFilterSelkies(f *testing.F) {
	for _, s := range []string{"kd,65", "REQUEST_KEYFRAME", "CLIENT_FRAME_ACK 7", "SETTINGS,{}", "\x05\x1f\x8b", "_gz,1", "cw,aGk=", "m,1,2,3,4"} {
		f.Add(uint8(1), []byte(s))
		f.Add(uint8(2), []byte(s))
	}
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		in := bytes.Clone(data)
		out, ok := FilterSelkies(true, int(typ), data)
		if !bytes.Equal(in, data) {
			t.Fatalf("the filter changed its input")
		}
		if ok {
			if typ != selkiesMsgText || !utf8.Valid(out) || !watcherMayForward(string(out)) {
				t.Fatalf("view-only forwarded %q (type %d) from %q", out, typ, data)
			}
		} else if out != nil {
			t.Fatalf("dropped, but returned %q", out)
		}
		out, ok = FilterSelkies(false, int(typ), data)
		if ok != (typ == selkiesMsgText || typ == selkiesMsgBinary) || (ok && !bytes.Equal(out, data)) {
			t.Fatalf("with input: %q, %v from %q (type %d)", out, ok, data, typ)
		}
	})
}

// Of what Selkies sends, a watcher never gets the sandbox's clipboard, in
// any text form, nor gzip'd text (issue #24, item 3).
func TestDropSelkiesToWatcher(t *testing.T) {
	t.Parallel()
	text, binary := selkiesMsgText, selkiesMsgBinary
	for _, c := range []struct {
		typ  int
		head string
		drop bool
	}{
		{text, "clipboard", true}, // clipboard,BASE64 and its parts, cut to the prefix
		{text, "clipboar", false}, // a short message that is not one
		{text, "AUTH_SUCC", false},
		{text, "MODE webs", false},
		{text, `{"type":"`, false},
		{text, "", false},
		{binary, "\x05\x1f\x8b", true},
		{binary, "\x03\x00\x00", false},
		{binary, "\x04\x01", false},
		{binary, "\x01", false},
		{binary, "", false},
	} {
		if got := DropSelkiesToWatcher(c.typ, []byte(c.head)); got != c.drop {
			t.Errorf("DropSelkiesToWatcher(%d, %q) = %v, want %v", c.typ, c.head, got, c.drop)
		}
	}
}
