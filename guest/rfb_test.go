package guest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// rfbPixel reads the colour of one pixel from a VNC server with no
// password: the RFB 3.8 handshake as a shared client, a 32-bit true-colour
// pixel format, raw encoding, one non-incremental update of that pixel.
func rfbPixel(t *testing.T, port, x, y int) ([3]byte, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return [3]byte{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	read := func(n int) []byte {
		b := make([]byte, n)
		if err == nil {
			_, err = io.ReadFull(c, b)
		}
		return b
	}
	write := func(b []byte) {
		if err == nil {
			_, err = c.Write(b)
		}
	}
	if v := read(12); err == nil && !rfbVersion.Match(v) {
		return [3]byte{}, fmt.Errorf("ProtocolVersion %q", v)
	}
	write([]byte("RFB 003.008\n"))
	types := read(int(read(1)[0]))
	none := false
	for _, s := range types {
		none = none || s == 1
	}
	if err == nil && !none {
		return [3]byte{}, fmt.Errorf("security types %v, want None (1) among them", types)
	}
	write([]byte{1})
	if r := read(4); err == nil && binary.BigEndian.Uint32(r) != 0 {
		return [3]byte{}, fmt.Errorf("security result %v", r)
	}
	write([]byte{1}) // ClientInit: shared
	init := read(24)
	read(int(binary.BigEndian.Uint32(init[20:])))
	// SetPixelFormat: 32 bpp, depth 24, little endian, true colour,
	// 255/255/255, shifts 16/8/0.
	write([]byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0})
	write([]byte{2, 0, 0, 1, 0, 0, 0, 0}) // SetEncodings: raw
	req := []byte{3, 0, 0, 0, 0, 0, 0, 1, 0, 1}
	binary.BigEndian.PutUint16(req[2:], uint16(x))
	binary.BigEndian.PutUint16(req[4:], uint16(y))
	write(req)
	for err == nil {
		switch typ := read(1)[0]; typ {
		case 0: // FramebufferUpdate
			n := binary.BigEndian.Uint16(read(3)[1:])
			var px [3]byte
			found := false
			for range n {
				h := read(12)
				rx, ry := int(binary.BigEndian.Uint16(h[0:])), int(binary.BigEndian.Uint16(h[2:]))
				rw, rh := int(binary.BigEndian.Uint16(h[4:])), int(binary.BigEndian.Uint16(h[6:]))
				if enc := int32(binary.BigEndian.Uint32(h[8:])); err == nil && enc != 0 {
					return [3]byte{}, fmt.Errorf("encoding %d, want raw", enc)
				}
				data := read(rw * rh * 4)
				if x >= rx && x < rx+rw && y >= ry && y < ry+rh && err == nil {
					i := ((y-ry)*rw + (x - rx)) * 4
					px, found = [3]byte{data[i+2], data[i+1], data[i]}, true
				}
			}
			if found {
				return px, nil
			}
			write(req)
		case 2: // Bell
		case 3: // ServerCutText
			read(int(binary.BigEndian.Uint32(read(7)[3:])))
		default:
			if err == nil {
				return [3]byte{}, fmt.Errorf("server message type %d", typ)
			}
		}
	}
	return [3]byte{}, err
}
