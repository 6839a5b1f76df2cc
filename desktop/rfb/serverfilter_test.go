package rfb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
)

// serverHello is a server's handshake up to and with ServerInit: RFB 3.8,
// security None, a 4×2 screen of 32 bits a pixel, named "x".
func serverHello(minor byte) []byte {
	b := []byte("RFB 003.00" + string('0'+minor) + "\n\x01\x01")
	if minor == 8 {
		b = append(b, 0, 0, 0, 0) // SecurityResult: only 3.8 sends it for None
	}
	b = append(b, 0, 4, 0, 2, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0, 0, 0, 0, 1, 'x')
	return b
}

// rect is a rectangle header and its data.
func rect(w, h uint16, enc int32, data ...[]byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, w)
	b = binary.BigEndian.AppendUint16(b, h)
	b = binary.BigEndian.AppendUint32(b, uint32(enc))
	return append(b, bytes.Join(data, nil)...)
}

func u32(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func update(rects ...[]byte) []byte {
	return append([]byte{rfbFramebufferUpdate, 0, 0, byte(len(rects))}, bytes.Join(rects, nil)...)
}

func serverCutText(n int32, data []byte) []byte {
	return append([]byte{rfbServerCutText, 0, 0, 0, byte(uint32(n) >> 24), byte(uint32(n) >> 16), byte(uint32(n) >> 8), byte(n)}, data...)
}

// viewServer runs a view-only connection's two filters: the client's
// hello (version minor) through the client's, then server through the
// server's, cut into chunks.
func viewServer(minor byte, chunks ...[]byte) ([]byte, error) {
	f := NewFilter(true)
	if _, err := f.Feed(nil, []byte("RFB 003.00"+string('0'+minor)+"\n\x01\x00")); err != nil {
		return nil, err
	}
	sf := f.Server()
	var out []byte
	var err error
	for _, c := range chunks {
		if out, err = sf.Feed(out, c); err != nil {
			return out, err
		}
	}
	return out, nil
}

// The server's clipboard never reaches a view-only viewer, in either RFB
// form, and every other message of the encodings it may ask for comes
// through whole, however the stream is cut (issue #24, item 3).
func TestServerFilterDropsClipboard(t *testing.T) {
	t.Parallel()
	px := func(n int) []byte { return bytes.Repeat([]byte{1, 2, 3, 0}, n) }
	fbu := update(
		rect(4, 2, encRaw, px(8)),
		rect(2, 2, encCopyRect, []byte{0, 1, 0, 1}),
		rect(4, 2, encRRE, u32(2), px(1), px(1), make([]byte, 8), px(1), make([]byte, 8)),
		rect(4, 2, encZRLE, u32(5), []byte("zrle!")),
		rect(4, 2, encZlib, u32(3), []byte("zlb")),
		rect(9, 2, encCursor, px(18), make([]byte, 2*2)),
		rect(0, 0, encDesktopName, u32(4), []byte("name")),
		rect(4, 2, encExtendedDesktopSize, []byte{1, 0, 0, 0}, make([]byte, 16)),
		rect(0, 0, encQEMULed, []byte{7}),
		rect(4, 2, encDesktopSize),
		rect(0, 0, encQEMUExtendedKey),
		rect(0, 0, encExtendedMouseButtons),
	)
	lastRect := append([]byte{rfbFramebufferUpdate, 0, 0xff, 0xff}, cat(rect(4, 2, encRaw, px(8)), rect(0, 0, encLastRect))...)
	colours := []byte{rfbSetColourMapEntries, 0, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}
	fence := []byte{rfbServerFence, 0, 0, 0, 0, 0, 0, 3, 3, 'a', 'b', 'c'}
	plain := serverCutText(6, []byte("secret"))
	caps := serverCutText(-8, []byte{0x01, 0, 0, 0x1f, 0, 0, 0x10, 0}) // Extended Clipboard: caps
	provide := serverCutText(-13, []byte{0x10, 0, 0, 0x01, 'z', 'l', 'i', 'b', 's', 'e', 'c', 'r', 't'})
	for _, minor := range []byte{7, 8} {
		in := cat(serverHello(minor), caps, fbu, plain, []byte{rfbBell}, lastRect, provide, colours, fence, []byte{rfbEndContinuousUpdates}, update(), plain)
		want := cat(serverHello(minor), fbu, []byte{rfbBell}, lastRect, colours, fence, []byte{rfbEndContinuousUpdates}, update())
		check := func(how string, got []byte, err error) {
			t.Helper()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("3.%d, %s: got %q, %v; want %q", minor, how, got, err, want)
			}
		}
		got, err := viewServer(minor, in)
		check("whole", got, err)
		for i := 1; i < len(in); i++ {
			got, err := viewServer(minor, in[:i], in[i:])
			check("split at "+strconv.Itoa(i), got, err)
		}
		bytewise := make([][]byte, len(in))
		for i := range in {
			bytewise[i] = in[i : i+1]
		}
		got, err = viewServer(minor, bytewise...)
		check("byte by byte", got, err)
	}
}

// What a view-only connection cannot frame ends it.
func TestServerFilterRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"Tight, never asked for", update(rect(4, 2, 7, []byte{0x80, 1, 2, 3}))},
		{"Hextile, never asked for", update(rect(4, 2, 5, []byte{1}))},
		{"an unknown message", []byte{77}},
		{"a fence over 64 bytes", []byte{rfbServerFence, 0, 0, 0, 0, 0, 0, 0, 65}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := viewServer(8, serverHello(8), c.in)
			if !errors.Is(err, ErrServerRefused) || !bytes.HasPrefix(out, serverHello(8)) || len(out) > len(serverHello(8))+4 {
				t.Fatalf("got %q, %v; want the hello (and an update's header) and ErrServerRefused", out, err)
			}
		})
	}
}

// A session with input has no server filter: its stream goes as it is.
func TestServerFilterOnlyViewOnly(t *testing.T) {
	t.Parallel()
	if NewFilter(false).Server() != nil {
		t.Fatal("a session with input got a server filter")
	}
}

// The pixel size a view-only client sets frames the updates after it.
func TestServerFilterFollowsPixelFormat(t *testing.T) {
	t.Parallel()
	f := NewFilter(true)
	pf := setPixelFormat()
	pf[4] = 16
	if _, err := f.Feed(nil, cat([]byte("RFB 003.008\n\x01\x00"), pf, fbur(0))); err != nil {
		t.Fatal(err)
	}
	sf := f.Server()
	in := cat(serverHello(8), update(rect(4, 2, encRaw, make([]byte, 4*2*2))), plainBell)
	out, err := sf.Feed(nil, in)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("got %q, %v; want it all", out, err)
	}
}

var plainBell = []byte{rfbBell}
