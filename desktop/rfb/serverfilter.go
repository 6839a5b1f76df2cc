package rfb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// A view-only viewer reads the screen and nothing else: besides dropping
// its input (Filter), the edge drops the server's clipboard on its way
// to the viewer — ServerCutText (3), in its plain form and in the
// Extended Clipboard form (a negative length: caps, notify, provide).
// To find those messages in the server's stream the edge must frame
// every server message, framebuffer updates included, so a view-only
// connection's SetEncodings is cut down to the encodings ServerFilter
// can frame without decoding: Raw, CopyRect, RRE, Zlib and ZRLE, and the
// pseudo-encodings whose rectangles have a known length (viewEncodings).
// The Extended Clipboard, xvp, Tight, Hextile and the rest are never
// asked for. Since ServerFilter needs the pixel size, a view-only client
// may set its pixel format only before its first update request.

// ErrServerRefused is wrapped by every error of ServerFilter: the
// server's stream has something a view-only connection cannot frame.
var ErrServerRefused = errors.New("rfb: server stream refused for a view-only viewer")

// Encodings a view-only connection may ask for: their rectangles, and
// the server messages they enable, are framed by ServerFilter.
const (
	encRRE                  = 2
	encZlib                 = 6
	encDesktopSize          = -223
	encLastRect             = -224
	encCursor               = -239
	encQEMUExtendedKey      = -258
	encQEMULed              = -261
	encDesktopName          = -307
	encExtendedDesktopSize  = -308
	encFence                = -312
	encContinuousUpdates    = -313
	encExtendedClipboard    = -1063131698 // 0xC0A1E5CE
	rfbEndContinuousUpdates = 150
	rfbServerFence          = 248
	rfbServerXvp            = 250
)

// viewEncoding says whether a view-only connection may ask for enc.
func viewEncoding(enc int32) bool {
	switch enc {
	case encRaw, encCopyRect, encRRE, encZlib, encZRLE,
		encDesktopSize, encLastRect, encCursor, encQEMUExtendedKey, encQEMULed,
		encDesktopName, encExtendedDesktopSize, encFence, encContinuousUpdates, encExtendedMouseButtons:
		return true
	}
	// Quality and compression levels: hints, never a rectangle.
	return enc >= -32 && enc <= -23 || enc >= -256 && enc <= -247
}

// rfbShared is what the two directions of one view-only connection
// share: the protocol version the client chose, the pixel size, and
// whether the client has asked for an update yet.
type rfbShared struct {
	mu        sync.Mutex
	minor     int // 7 or 8, from the client's version
	bpp       int // bytes per pixel, from ServerInit or the client's SetPixelFormat
	requested bool
}

// ServerFilter frames the server→client stream of a view-only RFB
// connection (RFB 3.7 or 3.8, security None) and drops the server's
// clipboard. It holds at most one header at a time (a few dozen bytes);
// rectangle data streams through. It is not safe for concurrent use; a
// connection has one, made by its Filter's Server.
type ServerFilter struct {
	sh    *rfbShared
	stage int
	buf   []byte
	skip  uint64 // payload bytes still to come
	drop  bool   // the payload is dropped, not passed
	rects int    // rectangles left in the current FramebufferUpdate
	err   error
}

// ServerFilter stages.
const (
	svVersion = iota
	svSecTypes
	svSecResult
	svInit
	svMessage
	svRect
	svPass // a handshake failed: the server says why and closes
)

// Server returns the filter of the server's side of f's connection, or
// nil when f is not view-only (the server's stream then goes as it is).
func (f *Filter) Server() *ServerFilter {
	if !f.viewOnly {
		return nil
	}
	return &ServerFilter{sh: f.sh, buf: make([]byte, 0, 64)}
}

// Feed reads src, the next bytes from the server, and appends to dst what
// may go to the viewer. On error dst still holds what came before, and
// every later call returns the error.
func (f *ServerFilter) Feed(dst, src []byte) ([]byte, error) {
	for f.err == nil {
		if f.skip > 0 {
			n := min(uint64(len(src)), f.skip)
			if !f.drop {
				dst = append(dst, src[:n]...)
			}
			src, f.skip = src[n:], f.skip-n
			if f.skip > 0 {
				return dst, nil
			}
			continue
		}
		if f.stage == svPass {
			return append(dst, src...), nil
		}
		want, err := f.need()
		if err != nil {
			f.fail(err)
			break
		}
		if len(f.buf) < want {
			if len(src) == 0 {
				return dst, nil
			}
			n := min(want-len(f.buf), len(src))
			f.buf, src = append(f.buf, src[:n]...), src[n:]
			continue
		}
		dst = f.act(dst)
	}
	return dst, f.err
}

func (f *ServerFilter) fail(err error) {
	f.err = fmt.Errorf("%w: %w", ErrServerRefused, err)
	f.buf = f.buf[:0]
}

// need says how many bytes of header the current step needs, from what
// f.buf holds of it so far.
func (f *ServerFilter) need() (int, error) {
	h := f.buf
	switch f.stage {
	case svVersion:
		return 12, nil
	case svSecTypes:
		switch {
		case len(h) < 1:
			return 1, nil
		case h[0] != 0:
			return 1 + int(h[0]), nil
		case len(h) < 5:
			return 5, nil
		}
		return 5 + int(min(binary.BigEndian.Uint32(h[1:5]), maxServerName)), nil
	case svSecResult:
		switch {
		case len(h) < 4:
			return 4, nil
		case binary.BigEndian.Uint32(h) == 0:
			return 4, nil
		case len(h) < 8:
			return 8, nil
		}
		return 8 + int(min(binary.BigEndian.Uint32(h[4:8]), maxServerName)), nil
	case svInit:
		return 24, nil
	case svMessage:
		if len(h) < 1 {
			return 1, nil
		}
		switch h[0] {
		case rfbFramebufferUpdate:
			return 4, nil
		case rfbSetColourMapEntries:
			return 6, nil
		case rfbBell, rfbEndContinuousUpdates:
			return 1, nil
		case rfbServerCutText:
			return 8, nil
		case rfbServerFence:
			return 9, nil
		case rfbServerXvp:
			return 4, nil
		}
		return 0, fmt.Errorf("server message type %d", h[0])
	case svRect:
		if len(h) < 12 {
			return 12, nil
		}
		switch enc := int32(binary.BigEndian.Uint32(h[8:12])); enc {
		case encRRE:
			return 16 + f.bpp(), nil
		case encZlib, encZRLE, encDesktopName, encExtendedDesktopSize:
			return 16, nil
		case encRaw, encCopyRect, encCursor, encQEMULed, encDesktopSize, encLastRect, encQEMUExtendedKey, encExtendedMouseButtons:
			return 12, nil
		default:
			return 0, fmt.Errorf("rectangle of encoding %d", enc)
		}
	}
	return 0, fmt.Errorf("stage %d", f.stage)
}

// act handles a whole header in f.buf: it passes it (or not), sets the
// payload to skip and moves to the next step.
func (f *ServerFilter) act(dst []byte) []byte {
	h := f.buf
	f.buf = f.buf[:0]
	f.drop = false
	switch f.stage {
	case svVersion:
		f.stage = svSecTypes
	case svSecTypes:
		f.stage = svSecResult
		switch {
		case h[0] == 0:
			f.stage = svPass
		case f.minor() == 7: // 3.7 sends no SecurityResult for None
			f.stage = svInit
		}
	case svSecResult:
		f.stage = svInit
		if binary.BigEndian.Uint32(h) != 0 {
			f.stage = svPass
		}
	case svInit:
		f.sh.mu.Lock()
		if f.sh.bpp == 0 {
			f.sh.bpp = int(h[4]) / 8
		}
		f.sh.mu.Unlock()
		f.skip = uint64(binary.BigEndian.Uint32(h[20:24]))
		f.stage = svMessage
	case svMessage:
		switch h[0] {
		case rfbFramebufferUpdate:
			if f.rects = int(binary.BigEndian.Uint16(h[2:4])); f.rects > 0 {
				f.stage = svRect
			}
		case rfbSetColourMapEntries:
			f.skip = 6 * uint64(binary.BigEndian.Uint16(h[4:6]))
		case rfbServerCutText:
			// Plain (a length) or Extended Clipboard (a negative one):
			// the sandbox's clipboard, which a view-only viewer never
			// gets.
			l := int64(int32(binary.BigEndian.Uint32(h[4:8])))
			f.skip, f.drop = uint64(max(l, -l)), true
			return dst
		case rfbServerFence:
			if h[8] > maxFencePayload {
				f.fail(fmt.Errorf("ServerFence payload of %d bytes (at most %d)", h[8], maxFencePayload))
				return dst
			}
			f.skip = uint64(h[8])
		}
	case svRect:
		f.skip = f.rectBody(h)
		f.rects--
		if int32(binary.BigEndian.Uint32(h[8:12])) == encLastRect {
			f.rects = 0
		}
		if f.rects == 0 {
			f.stage = svMessage
		}
	}
	return append(dst, h...)
}

// rectBody is the length of a rectangle's data after its header h (the
// 12 bytes of x, y, w, h, encoding and what need asked for more).
func (f *ServerFilter) rectBody(h []byte) uint64 {
	w, ht := uint64(binary.BigEndian.Uint16(h[4:6])), uint64(binary.BigEndian.Uint16(h[6:8]))
	bpp := uint64(f.bpp())
	switch int32(binary.BigEndian.Uint32(h[8:12])) {
	case encRaw:
		return w * ht * bpp
	case encCopyRect:
		return 4
	case encRRE:
		return uint64(binary.BigEndian.Uint32(h[12:16])) * (bpp + 8)
	case encZlib, encZRLE, encDesktopName:
		return uint64(binary.BigEndian.Uint32(h[12:16]))
	case encExtendedDesktopSize:
		return 16 * uint64(h[12])
	case encCursor:
		return w*ht*bpp + (w+7)/8*ht
	case encQEMULed:
		return 1
	}
	return 0
}

func (f *ServerFilter) bpp() int {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	return f.sh.bpp
}

func (f *ServerFilter) minor() int {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	return f.sh.minor
}

// viewEncodings returns a view-only client's SetEncodings message m with
// only the encodings ServerFilter can frame.
func viewEncodings(m []byte) []byte {
	out := append(make([]byte, 0, len(m)), m[:4]...)
	n := 0
	for i := 4; i+4 <= len(m); i += 4 {
		if viewEncoding(int32(binary.BigEndian.Uint32(m[i:]))) {
			out = append(out, m[i:i+4]...)
			n++
		}
	}
	binary.BigEndian.PutUint16(out[2:4], uint16(n))
	return out
}
