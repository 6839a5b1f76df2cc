package rfb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
)

// Client messages, built by hand as the spec lays them out.
func setPixelFormat() []byte {
	b := make([]byte, 20)
	b[0] = MsgSetPixelFormat
	b[4], b[5], b[7] = 32, 24, 1 // bpp, depth, true colour
	return b
}

func setEncodings(encs ...int32) []byte {
	b := []byte{MsgSetEncodings, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(len(encs)))
	for _, e := range encs {
		b = binary.BigEndian.AppendUint32(b, uint32(e))
	}
	return b
}

func fbur(incremental byte) []byte {
	return []byte{MsgFramebufferUpdateRequest, incremental, 0, 0, 0, 0, 7, 128, 4, 56}
}

func keyEvent(down byte, keysym uint32) []byte {
	b := []byte{MsgKeyEvent, down, 0, 0}
	return binary.BigEndian.AppendUint32(b, keysym)
}

func pointerEvent(mask byte, ext ...byte) []byte {
	return append([]byte{MsgPointerEvent, mask, 0, 10, 0, 20}, ext...)
}

func cutText(length int32, payload []byte) []byte {
	b := []byte{MsgClientCutText, 0, 0, 0}
	return append(binary.BigEndian.AppendUint32(b, uint32(length)), payload...)
}

func fence(payload []byte) []byte {
	b := []byte{MsgClientFence, 0, 0, 0, 0x80, 0, 0, 0x03, byte(len(payload))}
	return append(b, payload...)
}

func setDesktopSize(screens int) []byte {
	b := []byte{MsgSetDesktopSize, 0, 0x07, 0x80, 0x04, 0x38, byte(screens), 0}
	return append(b, make([]byte, 16*screens)...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var (
	clientHello   = []byte("RFB 003.008\n\x01\x00") // version, security None, ClientInit not shared
	forwardHello  = []byte("RFB 003.008\n\x01\x01") // what reaches the server: shared
	continuousOn  = []byte{MsgEnableContinuousUpdates, 1, 0, 0, 0, 0, 7, 128, 4, 56}
	extMouseOn    = setEncodings(7, 16, 0, encExtendedMouseButtons)
	extMouseSent  = setEncodings(16, 0, encExtendedMouseButtons) // Tight is not asked for on a view-only connection
	manyEncodings = setEncodings(make([]int32, maxEncodings+1)...)
)

type filterCase struct {
	name     string
	viewOnly bool
	in, want []byte // after the hello when hello is nil
	hello    []byte // nil: clientHello, forwarding forwardHello
	refused  bool
}

func filterCases() []filterCase {
	return []filterCase{
		// Read-only messages go through whole.
		{name: "SetPixelFormat", viewOnly: true, in: setPixelFormat(), want: setPixelFormat()},
		// ... SetEncodings with only what the server's side can frame (rfbview.go).
		{name: "SetEncodings", viewOnly: true, in: setEncodings(7, 1, 0, -239), want: setEncodings(1, 0, -239)},
		{name: "SetEncodings without the Extended Clipboard and other unframed encodings", viewOnly: true,
			in:   setEncodings(50, 7, -260, 16, 21, 5, 2, 6, 1, 0, -23, -256, -223, -224, -258, -261, -308, -309, -312, -313, -307, encExtendedClipboard, -316, 0x574d5664, -239),
			want: setEncodings(16, 2, 6, 1, 0, -23, -256, -223, -224, -258, -261, -308, -312, -313, -307, -316, -239)},
		{name: "SetPixelFormat after an update request", viewOnly: true, in: cat(setPixelFormat(), fbur(0), setPixelFormat()), want: cat(setPixelFormat(), fbur(0)), refused: true},
		{name: "SetEncodings empty", viewOnly: true, in: setEncodings(), want: setEncodings()},
		{name: "FramebufferUpdateRequest", viewOnly: true, in: cat(fbur(0), fbur(1)), want: cat(fbur(0), fbur(1))},
		{name: "EnableContinuousUpdates", viewOnly: true, in: continuousOn, want: continuousOn},
		{name: "ClientFence", viewOnly: true, in: cat(fence([]byte("abcd")), fence(nil)), want: cat(fence([]byte("abcd")), fence(nil))},

		// Input is dropped, and what follows it still goes through.
		{name: "KeyEvent", viewOnly: true, in: cat(keyEvent(1, 'a'), keyEvent(0, 'a'), fbur(1)), want: fbur(1)},
		{name: "PointerEvent", viewOnly: true, in: cat(pointerEvent(1), fbur(1)), want: fbur(1)},
		{name: "PointerEvent top bit without ExtendedMouseButtons is 6 bytes", viewOnly: true,
			in: cat(pointerEvent(0x80), fbur(1)), want: fbur(1)},
		{name: "PointerEvent extended after ExtendedMouseButtons is 7 bytes", viewOnly: true,
			in: cat(extMouseOn, pointerEvent(0x81, 0x02), fbur(1)), want: cat(extMouseSent, fbur(1))},
		{name: "PointerEvent normal after ExtendedMouseButtons is 6 bytes", viewOnly: true,
			in: cat(extMouseOn, pointerEvent(0x01), fbur(1)), want: cat(extMouseSent, fbur(1))},
		{name: "ClientCutText", viewOnly: true, in: cat(cutText(5, []byte("hello")), fbur(0)), want: fbur(0)},
		{name: "ClientCutText empty", viewOnly: true, in: cat(cutText(0, nil), fbur(0)), want: fbur(0)},
		{name: "ClientCutText extended clipboard", viewOnly: true,
			in: cat(cutText(-10, []byte("\x10\x00\x00\x01\x00\x00\x00\x02hi")), fbur(0)), want: fbur(0)},
		{name: "xvp", viewOnly: true, in: cat([]byte{MsgXvp, 0, 1, 2}, fbur(0)), want: fbur(0)},
		{name: "SetDesktopSize", viewOnly: true, in: cat(setDesktopSize(2), fbur(0)), want: fbur(0)},
		{name: "SetDesktopSize no screens", viewOnly: true, in: cat(setDesktopSize(0), fbur(0)), want: fbur(0)},
		{name: "QEMU extended key event", viewOnly: true,
			in: cat([]byte{MsgQEMU, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 30}, fbur(0)), want: fbur(0)},
		{name: "QEMU audio enable", viewOnly: true, in: cat([]byte{MsgQEMU, 1, 0, 0}, fbur(0)), want: fbur(0)},
		{name: "QEMU audio set format", viewOnly: true,
			in: cat([]byte{MsgQEMU, 1, 0, 2, 3, 2, 0, 0, 0xac, 0x44}, fbur(0)), want: fbur(0)},

		// Anything unknown or out of bounds closes; what came before stays.
		{name: "unknown type 1", viewOnly: true, in: cat(fbur(0), []byte{1, 0, 0, 0}), want: fbur(0), refused: true},
		{name: "unknown type 7 (FileTransfer)", viewOnly: true, in: []byte{7}, refused: true},
		{name: "unknown type 253 (gii)", viewOnly: true, in: []byte{253, 0, 0, 4, 1, 2, 3, 4}, refused: true},
		{name: "unknown type 127", viewOnly: true, in: []byte{127}, refused: true},
		{name: "QEMU unknown submessage", viewOnly: true, in: []byte{MsgQEMU, 9, 0, 0}, refused: true},
		{name: "QEMU audio unknown operation", viewOnly: true, in: []byte{MsgQEMU, 1, 0, 3}, refused: true},
		{name: "ClientFence payload over 64", viewOnly: true, in: fence(make([]byte, 65)), refused: true},
		{name: "too many encodings", viewOnly: true, in: manyEncodings, refused: true},
		{name: "refused after input", viewOnly: true, in: cat(keyEvent(1, 'a'), []byte{99}), refused: true},

		// The handshake.
		{name: "shared flag forced", viewOnly: true, hello: []byte("RFB 003.008\n\x01\x00"), want: []byte("RFB 003.008\n\x01\x01")},
		{name: "shared flag kept", viewOnly: true, hello: []byte("RFB 003.008\n\x01\x01"), want: []byte("RFB 003.008\n\x01\x01")},
		{name: "version 3.7", viewOnly: true, hello: []byte("RFB 003.007\n\x01\x00"), want: []byte("RFB 003.007\n\x01\x01")},
		{name: "version 3.3", viewOnly: true, hello: []byte("RFB 003.003\n\x00"), refused: true},
		{name: "version garbage", viewOnly: true, hello: []byte("GET / HTTP/1.1\r\n"), refused: true},
		{name: "security VNC auth", viewOnly: true, hello: []byte("RFB 003.008\n\x02"), want: []byte("RFB 003.008\n"), refused: true},
		{name: "security with input", hello: []byte("RFB 003.008\n\x10"), want: []byte("RFB 003.008\n"), refused: true},

		// A session with input: shared forced, then everything goes.
		{name: "input session passes input", hello: []byte("RFB 003.008\n\x01\x00"),
			in:   cat(keyEvent(1, 'a'), pointerEvent(1), cutText(2, []byte("hi")), []byte{99, 1, 2}),
			want: cat([]byte("RFB 003.008\n\x01\x01"), keyEvent(1, 'a'), pointerEvent(1), cutText(2, []byte("hi")), []byte{99, 1, 2})},
	}
}

func (c filterCase) stream() (in, want []byte) {
	if c.hello == nil {
		return cat(clientHello, c.in), cat(forwardHello, c.want)
	}
	return cat(c.hello, c.in), c.want
}

// feed runs a new filter over in cut into the given chunks.
func feed(viewOnly bool, chunks ...[]byte) ([]byte, error) {
	f := NewFilter(viewOnly)
	var out []byte
	var err error
	for _, c := range chunks {
		if out, err = f.Feed(out, c); err != nil {
			return out, err
		}
	}
	return out, nil
}

func TestFilter(t *testing.T) {
	for _, c := range filterCases() {
		t.Run(c.name, func(t *testing.T) {
			in, want := c.stream()
			check := func(how string, got []byte, err error) {
				t.Helper()
				if !bytes.Equal(got, want) {
					t.Errorf("%s: got %q, want %q", how, got, want)
				}
				if refused := errors.Is(err, ErrClientRefused); refused != c.refused || (err != nil && !refused) {
					t.Errorf("%s: got error %v, want refused %v", how, err, c.refused)
				}
			}
			got, err := feed(c.viewOnly, in)
			check("whole", got, err)
			for i := 1; i < len(in); i++ {
				got, err := feed(c.viewOnly, in[:i], in[i:])
				check("split at "+strconv.Itoa(i), got, err)
			}
			bytewise := make([][]byte, len(in))
			for i := range in {
				bytewise[i] = in[i : i+1]
			}
			got, err = feed(c.viewOnly, bytewise...)
			check("byte by byte", got, err)
		})
	}
}

// A refused filter stays refused.
func TestFilterStaysClosed(t *testing.T) {
	f := NewFilter(true)
	if _, err := f.Feed(nil, cat(clientHello, []byte{42})); !errors.Is(err, ErrClientRefused) {
		t.Fatalf("got %v, want ErrClientRefused", err)
	}
	if out, err := f.Feed(nil, fbur(0)); len(out) != 0 || !errors.Is(err, ErrClientRefused) {
		t.Fatalf("after refusal: got %q, %v, want nothing and ErrClientRefused", out, err)
	}
}

// A huge dropped ClientCutText is skipped as it streams, never held.
func TestFilterSkipsLargeCutText(t *testing.T) {
	f := NewFilter(true)
	out, err := f.Feed(nil, cat(clientHello, cutText(-1<<31, nil)))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := 0; i < 2048; i++ {
		if out, err = f.Feed(out[:0], chunk); err != nil || len(out) != 0 {
			t.Fatalf("chunk %d: got %d bytes, %v", i, len(out), err)
		}
		if cap(f.buf) > 64 {
			t.Fatalf("the filter holds %d bytes", cap(f.buf))
		}
	}
	if out, err = f.Feed(out[:0], fbur(1)); err != nil || !bytes.Equal(out, fbur(1)) {
		t.Fatalf("after the cut text: got %q, %v, want %q", out, err, fbur(1))
	}
}

// FuzzViewOnly feeds arbitrary client messages after a valid hello, cut
// where the fuzzer says, and checks that the filter never panics, that
// what it lets through is the hello and then whole read-only messages
// only, and that the cuts change nothing.
func FuzzViewOnly(f *testing.F) {
	for _, c := range filterCases() {
		if c.viewOnly && c.hello == nil {
			f.Add(c.in, uint8(3))
		}
	}
	f.Add(cat(extMouseOn, pointerEvent(0xff, 0xff), keyEvent(1, 0xffe3), cutText(-4, []byte{1, 2, 3, 4})), uint8(1))
	f.Fuzz(func(t *testing.T, msgs []byte, cut uint8) {
		in := cat(clientHello, msgs)
		whole, wholeErr := feed(true, in)
		var chunks [][]byte
		step := int(cut%17) + 1
		for i := 0; i < len(in); i += step {
			chunks = append(chunks, in[i:min(i+step, len(in))])
		}
		split, splitErr := feed(true, chunks...)
		if !bytes.Equal(whole, split) || (wholeErr == nil) != (splitErr == nil) {
			t.Fatalf("whole gave %q, %v; in chunks of %d: %q, %v", whole, wholeErr, step, split, splitErr)
		}
		if wholeErr != nil && !errors.Is(wholeErr, ErrClientRefused) {
			t.Fatalf("error %v does not wrap ErrClientRefused", wholeErr)
		}
		if !bytes.HasPrefix(whole, forwardHello) {
			t.Fatalf("output %q does not start with the shared hello", whole)
		}
		checkReadOnly(t, whole[len(forwardHello):])
	})
}

// checkReadOnly parses out as the server would, independently of the
// filter, and fails on anything but whole read-only messages.
func checkReadOnly(t *testing.T, out []byte) {
	t.Helper()
	for len(out) > 0 {
		var n int
		switch out[0] {
		case MsgSetPixelFormat:
			n = 20
		case MsgFramebufferUpdateRequest, MsgEnableContinuousUpdates:
			n = 10
		case MsgSetEncodings:
			if len(out) < 4 {
				t.Fatalf("partial SetEncodings header %q", out)
			}
			n = 4 + 4*int(binary.BigEndian.Uint16(out[2:]))
		case MsgClientFence:
			if len(out) < 9 {
				t.Fatalf("partial ClientFence header %q", out)
			}
			n = 9 + int(out[8])
		default:
			t.Fatalf("message type %d went through", out[0])
		}
		if len(out) < n {
			t.Fatalf("partial message of type %d: %d of %d bytes", out[0], len(out), n)
		}
		out = out[n:]
	}
}
