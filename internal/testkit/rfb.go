package testkit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// RFB is a test's VNC client: RFB 3.8 with security None, the Raw
// encoding only, and 32-bit little-endian true colour with red, green and
// blue at bits 16, 8 and 0. Each read gives the server ten seconds.
type RFB struct {
	rw     io.ReadWriter
	closer io.Closer // what DialRFB opened; nil otherwise
	// W and H are the framebuffer's size, as ServerInit says.
	W, H int
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
// an adapter whose every Write is one message. shared is ClientInit's
// flag. When rw has SetReadDeadline, every read has one.
func NewRFB(rw io.ReadWriter, shared bool) (*RFB, error) {
	c := &RFB{rw: rw}
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
	if _, err := c.read(int(binary.BigEndian.Uint32(init[20:]))); err != nil {
		return nil, err
	}
	// SetPixelFormat: 32 bpp, depth 24, little endian, true colour,
	// 255/255/255, shifts 16/8/0; SetEncodings: Raw.
	return c, c.Send(
		[]byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0},
		[]byte{2, 0, 0, 1, 0, 0, 0, 0},
	)
}

// Send writes client messages, in one Write.
func (c *RFB) Send(msgs ...[]byte) error {
	_, err := c.rw.Write(bytes.Join(msgs, nil))
	return err
}

// Pixel asks for the pixel at (x, y) and returns its colour (red, green,
// blue), skipping whatever else the server sends until an update covers
// it.
func (c *RFB) Pixel(x, y int) ([3]byte, error) {
	req := []byte{3, 0, 0, 0, 0, 0, 0, 1, 0, 1} // FramebufferUpdateRequest
	binary.BigEndian.PutUint16(req[2:], uint16(x))
	binary.BigEndian.PutUint16(req[4:], uint16(y))
	if err := c.Send(req); err != nil {
		return [3]byte{}, err
	}
	for {
		typ, err := c.read(1)
		if err != nil {
			return [3]byte{}, err
		}
		switch typ[0] {
		case 0: // FramebufferUpdate
		case 2: // Bell
			continue
		case 3: // ServerCutText
			h, err := c.read(7)
			if err == nil {
				_, err = c.read(int(binary.BigEndian.Uint32(h[3:])))
			}
			if err != nil {
				return [3]byte{}, err
			}
			continue
		default:
			return [3]byte{}, fmt.Errorf("server message type %d", typ[0])
		}
		h, err := c.read(3)
		if err != nil {
			return [3]byte{}, err
		}
		var px [3]byte
		found := false
		for range binary.BigEndian.Uint16(h[1:]) {
			r, err := c.read(12)
			if err != nil {
				return [3]byte{}, err
			}
			rx, ry := int(binary.BigEndian.Uint16(r[0:])), int(binary.BigEndian.Uint16(r[2:]))
			rw, rh := int(binary.BigEndian.Uint16(r[4:])), int(binary.BigEndian.Uint16(r[6:]))
			if enc := int32(binary.BigEndian.Uint32(r[8:])); enc != 0 {
				if enc < 0 && rw*rh == 0 {
					continue // an empty pseudo-rectangle
				}
				return [3]byte{}, fmt.Errorf("rectangle encoding %d, asked for Raw", enc)
			}
			data, err := c.read(rw * rh * 4)
			if err != nil {
				return [3]byte{}, err
			}
			if x >= rx && x < rx+rw && y >= ry && y < ry+rh {
				i := ((y-ry)*rw + (x - rx)) * 4
				px, found = [3]byte{data[i+2], data[i+1], data[i]}, true
			}
		}
		if found {
			return px, nil
		}
		if err := c.Send(req); err != nil {
			return [3]byte{}, err
		}
	}
}

// Close closes the connection DialRFB made (nothing for NewRFB's).
func (c *RFB) Close() error {
	if c.closer == nil {
		return nil
	}
	return c.closer.Close()
}

func (c *RFB) read(n int) ([]byte, error) {
	if d, ok := c.rw.(interface{ SetReadDeadline(time.Time) error }); ok {
		d.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.rw, b); err != nil {
		return nil, fmt.Errorf("read %d bytes of RFB: %w", n, err)
	}
	return b, nil
}
