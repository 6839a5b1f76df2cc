package rfb

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrClientRefused is wrapped by every error of the RFB filter: the client's
// stream broke a rule and the connection must close.
var ErrClientRefused = errors.New("rfb: client stream refused")

// RFB client→server message types (rfbproto, "Client to Server Messages").
const (
	MsgSetPixelFormat           = 0
	MsgSetEncodings             = 2
	MsgFramebufferUpdateRequest = 3
	MsgKeyEvent                 = 4
	MsgPointerEvent             = 5
	MsgClientCutText            = 6
	MsgEnableContinuousUpdates  = 150
	MsgClientFence              = 248
	MsgXvp                      = 250
	MsgSetDesktopSize           = 251
	MsgQEMU                     = 255

	// encExtendedMouseButtons is the pseudo-encoding after which a
	// PointerEvent whose button mask has its top bit set is 7 bytes long.
	encExtendedMouseButtons = -316

	// maxEncodings bounds one SetEncodings message (noVNC sends about
	// 30); more is refused rather than buffered.
	maxEncodings = 1024
	// maxFencePayload is the spec's limit on a ClientFence payload.
	maxFencePayload = 64
)

// Filter stages, in the order of the client's side of RFB 3.7/3.8.
const (
	stVersion  = iota // 12 bytes: "RFB 003.008\n"
	stSecurity        // 1 byte: the security type chosen; only None (1)
	stInit            // 1 byte: ClientInit's shared flag, forced to 1
	stMessages        // client messages, parsed one by one (view-only)
	stSkip            // inside a dropped message: skip bytes
	stPass            // everything goes through (a session with input)
	stClosed          // refused: nothing more goes through
)

// Filter is a state machine over the client→server byte stream of an RFB
// 3.7 or 3.8 connection without a password (security type None). For
// every session it forces ClientInit's shared flag to 1, so that no
// viewer can disconnect the others. For a view-only session it then
// parses every client message and lets through only whole messages that
// read nothing but the screen:
//
//	SetPixelFormat (0), SetEncodings (2), FramebufferUpdateRequest (3),
//	EnableContinuousUpdates (150) and ClientFence (248, a flow-control
//	echo that noVNC answers the server's fences with)
//
// and drops input and control: KeyEvent (4), PointerEvent (5, 6 bytes, or
// 7 with the top button bit once the client asked for the
// ExtendedMouseButtons pseudo-encoding), ClientCutText (6, also the
// Extended Clipboard form with a negative length), xvp (250),
// SetDesktopSize (251) and QEMU client messages (255: extended key events
// and audio). Any other message type, another protocol version, another
// security type, more than 1024 encodings or a fence payload over 64
// bytes is refused: the connection must close. Since only whole messages
// it framed itself go out, and none of them is input, the server's view
// of the stream cannot drift from the filter's.
//
// Filter holds no more than one allowed message (at most 4 KiB) at a
// time; dropped messages, whatever their length, are skipped as they
// stream. It is not safe for concurrent use; a connection has one.
type Filter struct {
	viewOnly bool
	stage    int
	buf      []byte     // the part of the current handshake step or message read so far
	skip     uint64     // bytes of a dropped message still to come
	extMouse bool       // the client asked for ExtendedMouseButtons
	sh       *rfbShared // what the server's side (Server) needs to know; view-only only
	err      error
}

// NewFilter returns a filter for a new connection; viewOnly makes it
// parse and filter client messages after the handshake.
func NewFilter(viewOnly bool) *Filter {
	f := &Filter{viewOnly: viewOnly, buf: make([]byte, 0, 64)}
	if viewOnly {
		f.sh = &rfbShared{}
	}
	return f
}

// Feed reads src, the next bytes from the client, and appends to dst the
// bytes that may go to the server. A message split across calls is held
// until it is whole. On error dst still holds what came before the
// refused part (safe to send), and every later call returns the error.
func (f *Filter) Feed(dst, src []byte) ([]byte, error) {
	for f.err == nil {
		switch f.stage {
		case stPass:
			return append(dst, src...), nil
		case stSkip:
			if len(src) == 0 {
				return dst, nil
			}
			n := uint64(len(src))
			if n > f.skip {
				n = f.skip
			}
			src, f.skip = src[n:], f.skip-n
			if f.skip == 0 {
				f.stage = stMessages
			}
		case stMessages:
			want := 1
			if len(f.buf) > 0 {
				n, whole, drop, err := f.size(f.buf)
				switch {
				case err != nil:
					f.fail(err)
					continue
				case whole && drop:
					// Input: skip the rest of it without holding it.
					if f.skip, f.buf = uint64(n-len(f.buf)), f.buf[:0]; f.skip > 0 {
						f.stage = stSkip
					}
					continue
				case whole && len(f.buf) == n:
					msg := f.buf
					switch msg[0] {
					case MsgSetEncodings:
						f.noteEncodings(msg[4:])
						msg = viewEncodings(msg)
					case MsgSetPixelFormat:
						if err := f.notePixelFormat(msg); err != nil {
							f.fail(err)
							continue
						}
					case MsgFramebufferUpdateRequest, MsgEnableContinuousUpdates:
						f.sh.mu.Lock()
						f.sh.requested = true
						f.sh.mu.Unlock()
					}
					dst, f.buf = append(dst, msg...), f.buf[:0]
					continue
				}
				want = n
			}
			if len(src) == 0 {
				return dst, nil
			}
			src = f.fill(want, src)
		default: // the handshake
			if len(src) == 0 {
				return dst, nil
			}
			want := 1
			if f.stage == stVersion {
				want = 12
			}
			if src = f.fill(want, src); len(f.buf) == want {
				dst = f.handshake(dst)
			}
		}
	}
	return dst, f.err
}

// fill moves bytes from src to f.buf until f.buf holds want bytes, and
// returns what is left of src.
func (f *Filter) fill(want int, src []byte) []byte {
	n := min(max(want-len(f.buf), 0), len(src))
	f.buf = append(f.buf, src[:n]...)
	return src[n:]
}

// handshake acts on f.buf once it holds a whole handshake step.
func (f *Filter) handshake(dst []byte) []byte {
	switch f.stage {
	case stVersion:
		v := string(f.buf)
		if v != "RFB 003.008\n" && v != "RFB 003.007\n" {
			f.fail(fmt.Errorf("protocol version %q: only 3.7 and 3.8", sanitize(f.buf)))
			return dst
		}
		if f.sh != nil {
			f.sh.mu.Lock()
			f.sh.minor = int(v[10] - '0')
			f.sh.mu.Unlock()
		}
		dst = append(dst, f.buf...)
		f.stage = stSecurity
	case stSecurity:
		if f.buf[0] != 1 {
			f.fail(fmt.Errorf("security type %d: only None (1)", f.buf[0]))
			return dst
		}
		dst = append(dst, 1)
		f.stage = stInit
	case stInit:
		dst = append(dst, 1) // shared, whatever the client asked
		f.stage = stPass
		if f.viewOnly {
			f.stage = stMessages
		}
	}
	f.buf = f.buf[:0]
	return dst
}

// size says how long the message starting with h (at least its type
// byte) is. whole says n is the message's whole length; otherwise n is
// the length of the header still needed to tell. drop says the message
// is input that a view-only session never sends on.
func (f *Filter) size(h []byte) (n int, whole, drop bool, err error) {
	n, drop, header := messageShape(h[0], f.extMouse, h)
	switch {
	case n < 0:
		return 0, false, false, fmt.Errorf("client message type %d is not allowed", h[0])
	case n > 0:
		return n, true, drop, nil
	case len(h) < header:
		return header, false, drop, nil
	}
	switch h[0] {
	case MsgSetEncodings:
		c := int(binary.BigEndian.Uint16(h[2:4]))
		if c > maxEncodings {
			return 0, false, false, fmt.Errorf("SetEncodings with %d encodings (at most %d)", c, maxEncodings)
		}
		return 4 + 4*c, true, false, nil
	case MsgClientFence:
		if h[8] > maxFencePayload {
			return 0, false, false, fmt.Errorf("ClientFence payload of %d bytes (at most %d)", h[8], maxFencePayload)
		}
		return 9 + int(h[8]), true, false, nil
	case MsgPointerEvent:
		if h[1]&0x80 != 0 {
			return 7, true, true, nil
		}
		return 6, true, true, nil
	case MsgClientCutText:
		// A negative length is the Extended Clipboard form: |length|
		// bytes of flags and data follow.
		l := int64(int32(binary.BigEndian.Uint32(h[4:8])))
		if l < 0 {
			l = -l
		}
		return 8 + int(l), true, true, nil
	case MsgSetDesktopSize:
		return 8 + 16*int(h[6]), true, true, nil
	case MsgQEMU:
		switch h[1] {
		case 0: // extended key event
			return 12, true, true, nil
		case 1: // audio: enable, disable, or set format (6 more bytes)
			switch binary.BigEndian.Uint16(h[2:4]) {
			case 0, 1:
				return 4, true, true, nil
			case 2:
				return 10, true, true, nil
			}
		}
		return 0, false, false, fmt.Errorf("QEMU client message %d is unknown", h[1])
	}
	return 0, false, false, fmt.Errorf("client message type %d has no length", h[0])
}

// messageShape returns, for a message type, its fixed length (0 when the
// header decides it, -1 for a type that is refused), whether a view-only
// session drops it, and how many bytes of header decide its length.
func messageShape(typ byte, extMouse bool, h []byte) (n int, drop bool, header int) {
	switch typ {
	case MsgSetPixelFormat:
		return 20, false, 1
	case MsgSetEncodings:
		return 0, false, 4
	case MsgFramebufferUpdateRequest:
		return 10, false, 1
	case MsgEnableContinuousUpdates:
		return 10, false, 1
	case MsgClientFence:
		return 0, false, 9
	case MsgKeyEvent:
		return 8, true, 1
	case MsgPointerEvent:
		if extMouse {
			return 0, true, 2
		}
		return 6, true, 1
	case MsgClientCutText:
		return 0, true, 8
	case MsgXvp:
		return 4, true, 1
	case MsgSetDesktopSize:
		return 0, true, 8
	case MsgQEMU:
		if len(h) >= 2 && h[1] == 1 {
			return 0, true, 4
		}
		return 0, true, 2
	}
	return -1, false, 1
}

// noteEncodings remembers whether the client asked for the
// ExtendedMouseButtons pseudo-encoding. It stays on once asked: the
// filter only uses it to frame PointerEvents it drops anyway.
func (f *Filter) noteEncodings(list []byte) {
	for i := 0; i+4 <= len(list); i += 4 {
		if int32(binary.BigEndian.Uint32(list[i:])) == encExtendedMouseButtons {
			f.extMouse = true
		}
	}
}

// notePixelFormat tells the server's side the pixel size a view-only
// client asks for. Only before its first update request: an update
// already asked for may come in the old format, and the server's side
// could not frame it.
func (f *Filter) notePixelFormat(m []byte) error {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	switch {
	case f.sh.requested:
		return errors.New("SetPixelFormat after an update request")
	case m[4] != 8 && m[4] != 16 && m[4] != 32:
		return fmt.Errorf("SetPixelFormat of %d bits a pixel", m[4])
	}
	f.sh.bpp = int(m[4]) / 8
	return nil
}

func (f *Filter) fail(err error) {
	f.err = fmt.Errorf("%w: %w", ErrClientRefused, err)
	f.stage = stClosed
	f.buf = f.buf[:0]
}

// sanitize makes a protocol version printable for an error message.
func sanitize(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		out[i] = c
	}
	return string(out)
}
