package desktop

import (
	"strconv"
	"strings"
)

// Selkies client→server message kinds (the websocket of Selkies'
// /api/websockets, pinned in selkies.go). A text message is a verb and,
// for most, a comma and arguments: kd,KEYSYM / ku,KEYSYM (keys),
// m,X,Y,MASK,SCROLL / m2,DX,DY,MASK,SCROLL (pointer), cw,BASE64 (clipboard
// write), SETTINGS,JSON, CLIENT_FRAME_ACK ID (a space), REQUEST_KEYFRAME,
// START_VIDEO, STOP_VIDEO, _gz,1, cmd,… and more. A binary message's
// first byte says what it is: 0x02 microphone PCM, 0x05 a gzip'd text
// message (which Selkies inflates and then treats as text), others file
// uploads.
const (
	selkiesMsgText   = 1 // websocket.TextMessage
	selkiesMsgBinary = 2 // websocket.BinaryMessage

	// maxWatcherMessage bounds a view-only page's text message: every
	// message a watcher may send is a few dozen bytes, but for SETTINGS
	// (a page's JSON of its preferences, replaced anyway).
	maxWatcherMessage = 4096

	// watcherSettings is what a view-only page's SETTINGS message becomes
	// on its way to Selkies: a watcher needs Selkies to hear that it wants
	// the primary display (Selkies then sends it the shared stream and a
	// keyframe), and nothing it asks beyond that (encoder, size, frame
	// rate) is the watcher's to choose.
	watcherSettings = `SETTINGS,{"displayId":"primary"}`
)

// FilterSelkies decides what of one client→server websocket message goes
// on to Selkies: out is the message to forward (data itself, or a
// replacement), ok false means drop it. It is a pure function of its
// arguments.
//
// A session with input forwards everything, text and binary: its page
// may drive the desktop, which is what Selkies' controller role is for.
//
// A view-only session — Selkies gives it the viewer role too; this is the
// second lock — forwards only the text messages a watcher needs, each in
// its exact form:
//
//	REQUEST_KEYFRAME, START_VIDEO, STOP_VIDEO   (its own stream)
//	CLIENT_FRAME_ACK N                          (N a decimal 0…65535)
//	SETTINGS,…                                  (replaced by watcherSettings)
//
// Everything else is dropped: _gz,1 (gzip'd text from the server, which
// DropSelkiesToWatcher could not read), input (kd, ku, kr, kh, m, m2, co, js),
// clipboard (cw, cb, cr, REQUEST_CLIPBOARD), commands (cmd), resizes and
// settings (r, s, vb, …), anything longer than maxWatcherMessage, and
// every binary message — microphone audio (0x02), uploads, and gzip'd
// text (0x05), which would otherwise smuggle any text past this list.
func FilterSelkies(viewOnly bool, messageType int, data []byte) (out []byte, ok bool) {
	if !viewOnly && (messageType == selkiesMsgText || messageType == selkiesMsgBinary) {
		return data, true
	}
	if !viewOnly || messageType != selkiesMsgText || len(data) > maxWatcherMessage {
		return nil, false
	}
	switch m := string(data); {
	case m == "REQUEST_KEYFRAME", m == "START_VIDEO", m == "STOP_VIDEO":
		return data, true
	case strings.HasPrefix(m, "SETTINGS,"):
		return []byte(watcherSettings), true
	case strings.HasPrefix(m, "CLIENT_FRAME_ACK "):
		if frameID(m[len("CLIENT_FRAME_ACK "):]) {
			return data, true
		}
	}
	return nil, false
}

// frameID says whether s is a frame id as Selkies sends them: decimal,
// 0 to 65535, no sign, no leading zeros.
func frameID(s string) bool {
	if s == "" || len(s) > 5 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(s)
	return err == nil && n <= 65535
}

// selkiesClipboardPrefix starts every Selkies server→client text message
// that carries the sandbox's clipboard: clipboard,BASE64 and the parts of
// a large one (clipboard_start, clipboard_data, clipboard_finish, …).
const selkiesClipboardPrefix = "clipboard"

// DropSelkiesToWatcher decides, from a Selkies server→client message's
// type and first bytes (up to len("clipboard")), whether a view-only
// viewer must not get it: the sandbox's clipboard in any of its text
// forms, and gzip'd text (0x05), which could carry one and which a
// watcher never asks for (FilterSelkies drops its _gz,1). A view-only
// session reads the screen and nothing else.
func DropSelkiesToWatcher(messageType int, head []byte) bool {
	switch messageType {
	case selkiesMsgText:
		return strings.HasPrefix(string(head), selkiesClipboardPrefix)
	case selkiesMsgBinary:
		return len(head) > 0 && head[0] == 0x05
	}
	return false
}
