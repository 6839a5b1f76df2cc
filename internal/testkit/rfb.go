package testkit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// RFBTimeout is what each read of an RFB gives the server: a desktop
// that a websocket starts (in a VM under TCG, too) may take that long to
// say its ProtocolVersion.
const RFBTimeout = 30 * time.Second

// maxCutText bounds a ServerCutText ReadUpdate keeps.
const maxCutText = 16 << 20

// RFB is a test's VNC client: RFB 3.8 with security None, and 32-bit
// little-endian true colour with red, green and blue at bits 16, 8 and 0,
// in the Raw encoding unless SetEncodings asks for others. Each read
// gives the server RFBTimeout.
type RFB struct {
	rw     io.ReadWriter
	r      *bufio.Reader // over rw
	closer io.Closer     // what DialRFB opened; nil otherwise
	buf    []byte        // a Raw rectangle's pixels
	// W and H are the framebuffer's size, as ServerInit (or a later
	// DesktopSize rectangle) says.
	W, H int
}

// Rect is one rectangle of a FramebufferUpdate: where it is and its
// encoding (0 Raw, 16 ZRLE, negative a pseudo-encoding).
type Rect struct {
	X, Y, W, H int
	Encoding   int32
}

// Update is what ReadUpdate read: the rectangles of one
// FramebufferUpdate and the data of every ServerCutText that came before
// it (an Extended Clipboard message's too, whose length is negative on
// the wire).
type Update struct {
	Rects []Rect
	Cuts  [][]byte
}

// Area is how many pixels the update's rectangles cover, pseudo-
// rectangles left out.
func (u Update) Area() int {
	n := 0
	for _, r := range u.Rects {
		if r.Encoding >= 0 {
			n += r.W * r.H
		}
	}
	return n
}

// DialRFB connects to the VNC server at 127.0.0.1:port and does the
// handshake as a shared client.
func DialRFB(port int) (*RFB, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return nil, err
	}
	r, err := NewRFB(c, true)
	if err != nil {
		c.Close()
		return nil, err
	}
	r.closer = c
	return r, nil
}

// NewRFB does the handshake over rw: a connection, or a websocket behind
// an adapter whose every Write is one message (WSStream). shared is
// ClientInit's flag. When rw has SetReadDeadline, every read has one.
func NewRFB(rw io.ReadWriter, shared bool) (*RFB, error) {
	c := &RFB{rw: rw, r: bufio.NewReaderSize(rw, 256<<10)}
	v, err := c.read(12)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(v, []byte("RFB 003.")) {
		return nil, fmt.Errorf("ProtocolVersion %q", v)
	}
	if err := c.Send([]byte("RFB 003.008\n")); err != nil {
		return nil, err
	}
	n, err := c.read(1)
	if err != nil {
		return nil, err
	}
	types, err := c.read(int(n[0]))
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(types, []byte{1}) {
		return nil, fmt.Errorf("security types %v, want None (1) among them", types)
	}
	if err := c.Send([]byte{1}); err != nil {
		return nil, err
	}
	res, err := c.read(4)
	if err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint32(res) != 0 {
		return nil, fmt.Errorf("security result %v", res)
	}
	flag := byte(0)
	if shared {
		flag = 1
	}
	if err := c.Send([]byte{flag}); err != nil {
		return nil, err
	}
	init, err := c.read(24)
	if err != nil {
		return nil, err
	}
	c.W, c.H = int(binary.BigEndian.Uint16(init[0:])), int(binary.BigEndian.Uint16(init[2:]))
	if err := c.discard(int(binary.BigEndian.Uint32(init[20:]))); err != nil {
		return nil, err
	}
	// SetPixelFormat: 32 bpp, depth 24, little endian, true colour,
	// 255/255/255, shifts 16/8/0; SetEncodings: Raw.
	if err := c.Send([]byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}); err != nil {
		return nil, err
	}
	return c, c.SetEncodings(0)
}

// Send writes client messages, in one Write.
func (c *RFB) Send(msgs ...[]byte) error {
	_, err := c.rw.Write(bytes.Join(msgs, nil))
	return err
}

// SetEncodings says which encodings (and pseudo-encodings) the client
// takes, in order of preference: 0 Raw, 16 ZRLE, -1063131698 Extended
// Clipboard. ReadUpdate reads Raw and ZRLE rectangles.
func (c *RFB) SetEncodings(encs ...int32) error {
	msg := []byte{2, 0, 0, 0}
	binary.BigEndian.PutUint16(msg[2:], uint16(len(encs)))
	for _, e := range encs {
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	return c.Send(msg)
}

// Request asks for an update of the rectangle at (x, y) of w by h;
// incremental asks only for what changed.
func (c *RFB) Request(x, y, w, h int, incremental bool) error {
	req := []byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if incremental {
		req[1] = 1
	}
	binary.BigEndian.PutUint16(req[2:], uint16(x))
	binary.BigEndian.PutUint16(req[4:], uint16(y))
	binary.BigEndian.PutUint16(req[6:], uint16(w))
	binary.BigEndian.PutUint16(req[8:], uint16(h))
	return c.Send(req)
}

// Key sends a press and a release of an X keysym.
func (c *RFB) Key(sym uint32) error {
	ev := func(down byte) []byte {
		b := []byte{4, down, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[4:], sym)
		return b
	}
	return c.Send(ev(1), ev(0))
}

// Sync asks for one pixel and reads the update that answers: the server
// has handled everything sent before it on this connection.
func (c *RFB) Sync() error {
	if err := c.Request(0, 0, 1, 1, false); err != nil {
		return err
	}
	_, err := c.ReadUpdate(nil)
	return err
}

// ReadUpdate reads server messages up to the end of the next
// FramebufferUpdate, passing over bells and keeping cut texts. Raw
// rectangles' pixels are drawn into into where they overlap its bounds
// (nil: nowhere); ZRLE rectangles are skipped by their length, unread;
// DesktopSize and LastRect, and other pseudo-rectangles of no area,
// carry nothing. Any other message or encoding is an error.
func (c *RFB) ReadUpdate(into *image.RGBA) (Update, error) {
	var u Update
	for {
		typ, err := c.read(1)
		if err != nil {
			return u, err
		}
		switch typ[0] {
		case 0: // FramebufferUpdate
		case 2: // Bell
			continue
		case 3: // ServerCutText
			h, err := c.read(7)
			if err != nil {
				return u, err
			}
			l := int32(binary.BigEndian.Uint32(h[3:]))
			if l == math.MinInt32 || max(l, -l) > maxCutText {
				return u, fmt.Errorf("ServerCutText of %d bytes", l)
			}
			data, err := c.read(int(max(l, -l)))
			if err != nil {
				return u, err
			}
			u.Cuts = append(u.Cuts, data)
			continue
		default:
			return u, fmt.Errorf("server message type %d", typ[0])
		}
		break
	}
	h, err := c.read(3)
	if err != nil {
		return u, err
	}
	for range binary.BigEndian.Uint16(h[1:]) {
		b, err := c.read(12)
		if err != nil {
			return u, err
		}
		r := Rect{X: int(binary.BigEndian.Uint16(b[0:])), Y: int(binary.BigEndian.Uint16(b[2:])),
			W: int(binary.BigEndian.Uint16(b[4:])), H: int(binary.BigEndian.Uint16(b[6:])),
			Encoding: int32(binary.BigEndian.Uint32(b[8:]))}
		u.Rects = append(u.Rects, r)
		switch {
		case r.Encoding == 0:
			if err := c.raw(r, into); err != nil {
				return u, err
			}
		case r.Encoding == 16: // ZRLE: a length, then that much zlib data
			n, err := c.read(4)
			if err == nil {
				err = c.discard(int(binary.BigEndian.Uint32(n)))
			}
			if err != nil {
				return u, err
			}
		case r.Encoding == -223: // DesktopSize
			c.W, c.H = r.W, r.H
		case r.Encoding == -224: // LastRect: the update ends here
			return u, nil
		case r.Encoding < 0 && r.W*r.H == 0:
		default:
			return u, fmt.Errorf("rectangle encoding %d, asked for Raw or ZRLE", r.Encoding)
		}
	}
	return u, nil
}

// raw reads a Raw rectangle's pixels, a row at a time, drawing those
// inside into's bounds.
func (c *RFB) raw(r Rect, into *image.RGBA) error {
	rr := image.Rect(r.X, r.Y, r.X+r.W, r.Y+r.H)
	if into == nil || !rr.Overlaps(into.Bounds()) {
		return c.discard(r.W * r.H * 4)
	}
	in := rr.Intersect(into.Bounds())
	if cap(c.buf) < r.W*4 {
		c.buf = make([]byte, r.W*4)
	}
	row := c.buf[:r.W*4]
	for y := r.Y; y < r.Y+r.H; y++ {
		if y < in.Min.Y || y >= in.Max.Y {
			if err := c.discard(len(row)); err != nil {
				return err
			}
			continue
		}
		c.deadline()
		if _, err := io.ReadFull(c.r, row); err != nil {
			return fmt.Errorf("read %d bytes of RFB: %w", len(row), err)
		}
		for x := in.Min.X; x < in.Max.X; x++ {
			p := row[(x-r.X)*4:]
			o := into.PixOffset(x, y)
			into.Pix[o], into.Pix[o+1], into.Pix[o+2], into.Pix[o+3] = p[2], p[1], p[0], 255
		}
	}
	return nil
}

// Pixel asks for the pixel at (x, y) and returns its colour (red, green,
// blue), reading updates until one covers it.
func (c *RFB) Pixel(x, y int) ([3]byte, error) {
	img := image.NewRGBA(image.Rect(x, y, x+1, y+1))
	for {
		if err := c.Request(x, y, 1, 1, false); err != nil {
			return [3]byte{}, err
		}
		u, err := c.ReadUpdate(img)
		if err != nil {
			return [3]byte{}, err
		}
		for _, r := range u.Rects {
			if r.Encoding == 0 && image.Pt(x, y).In(image.Rect(r.X, r.Y, r.X+r.W, r.Y+r.H)) {
				return RGBAt(img, x, y), nil
			}
		}
	}
}

// Screen asks for the whole screen and returns what the update that
// answers drew (black where it drew nothing).
func (c *RFB) Screen() (*image.RGBA, error) {
	img := image.NewRGBA(image.Rect(0, 0, c.W, c.H))
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	if err := c.Request(0, 0, c.W, c.H, false); err != nil {
		return nil, err
	}
	if _, err := c.ReadUpdate(img); err != nil {
		return nil, err
	}
	return img, nil
}

// Close closes the connection DialRFB made (nothing for NewRFB's).
func (c *RFB) Close() error {
	if c.closer == nil {
		return nil
	}
	return c.closer.Close()
}

func (c *RFB) deadline() {
	if d, ok := c.rw.(interface{ SetReadDeadline(time.Time) error }); ok {
		d.SetReadDeadline(time.Now().Add(RFBTimeout))
	}
}

func (c *RFB) read(n int) ([]byte, error) {
	c.deadline()
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, fmt.Errorf("read %d bytes of RFB: %w", n, err)
	}
	return b, nil
}

func (c *RFB) discard(n int) error {
	c.deadline()
	if _, err := c.r.Discard(n); err != nil {
		return fmt.Errorf("read %d bytes of RFB: %w", n, err)
	}
	return nil
}

// WSStream is a websocket as the byte stream an RFB client reads and
// writes: the binary messages it gets read as one stream, and each Write
// is one binary message. Writes may come from more than one goroutine.
type WSStream struct {
	ws *websocket.Conn
	r  io.Reader // the message being read

	mu sync.Mutex // over writes
}

// NewWSStream is ws as a stream; closing ws ends it.
func NewWSStream(ws *websocket.Conn) *WSStream { return &WSStream{ws: ws} }

func (s *WSStream) Read(p []byte) (int, error) {
	for {
		if s.r == nil {
			_, r, err := s.ws.NextReader()
			if err != nil {
				return 0, err
			}
			s.r = r
		}
		n, err := s.r.Read(p)
		if errors.Is(err, io.EOF) {
			s.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (s *WSStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// SetReadDeadline is the websocket's.
func (s *WSStream) SetReadDeadline(t time.Time) error { return s.ws.SetReadDeadline(t) }
