package rfb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
)

// The wall's RFB client: just enough of RFB 3.8 to keep a small picture of
// a desktop. It asks for 32 bpp true colour with red in the lowest byte
// (so a pixel's bytes are R, G, B, X, as in image.RGBA) and for ZRLE,
// CopyRect and Raw: ZRLE (zrle.go) carries a changed screen of text in
// about 150 KB instead of Raw's 8.3 MB; Raw is what a server without ZRLE
// sends.
//
// It does not keep the desktop's framebuffer: a tile is the desktop
// scaled down by averaging (each tile pixel the mean of its block of
// desktop pixels), so a 1920x1080 desktop costs a 480x270 picture in
// 4:2:0 YCbCr (194 KB), not 8 MB. Raw rectangles are averaged as they stream, ZRLE ones a 64x64
// tile at a time; a tile pixel whose block a rectangle (or a ZRLE tile)
// covers only in part becomes the mean of the part it covers. Averaging, rather than one source pixel per tile pixel, keeps
// text a grey line instead of scattered dots: smaller pictures (a screen
// of text: 27 KB instead of 43 at quality 70) that read better. A
// CopyRect's rectangle is asked for again, non-incrementally, with the
// next request: the tile shows the moved area one request later (about a
// second), exactly.

// ErrServer is wrapped by every error of the wall's RFB client about
// what the server sent.
var ErrServer = errors.New("rfb: server stream refused")

// RFB server→client message types and the encodings the client asks for.
const (
	rfbFramebufferUpdate   = 0
	rfbSetColourMapEntries = 1
	rfbBell                = 2
	rfbServerCutText       = 3

	encRaw      = 0
	encCopyRect = 1

	// maxScreen bounds the framebuffer a server may announce.
	maxScreen = 8192
	// maxServerName and maxCutText bound a desktop name, a refusal reason and a cut
	// text the client skips.
	maxServerName = 4096
	maxCutText    = 16 << 20
)

// Client reads one RFB server's stream into a tile picture.
type Client struct {
	r *bufio.Reader
	w io.Writer

	Width, Height int             // the desktop's size
	Pic           *image.YCbCr    // the tile: fbW, fbH averaged down, 4:2:0 as its JPEG is
	colOf         []int32         // desktop column → the tile column whose block holds it
	colEnd        []int32         // tile column → the desktop column after its block
	rowOf         []int32         // desktop row → the tile row whose block holds it
	row           []byte          // one row of a Raw rectangle
	acc           []uint32        // per tile column: red, green, blue sums and a count, for one tile row
	z             *zrleDecoder    // the ZRLE stream, from its first rectangle
	Dirty         bool            // pic changed since the last take
	Refresh       image.Rectangle // desktop area to ask for again (CopyRects)
}

// pixelFormat is what SetPixelFormat asks for: 32 bpp, depth 24, little
// endian, true colour, 255 per channel, red at bit 0, green 8, blue 16.
var pixelFormat = [16]byte{32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 0, 8, 16, 0, 0, 0}

// NewClient does the client's side of the handshake on rw (RFB 3.8,
// security None, shared), asks for its pixel format and encodings, and
// sizes the tile to at most width pixels wide.
func NewClient(rw io.ReadWriter, width int) (*Client, error) {
	c := &Client{r: bufio.NewReaderSize(rw, 16<<10), w: rw}
	var b [24]byte
	if _, err := io.ReadFull(c.r, b[:12]); err != nil {
		return nil, err
	}
	if v := string(b[:12]); v[:8] != "RFB 003." || v[11] != '\n' || v < "RFB 003.008\n" {
		return nil, fmt.Errorf("%w: protocol version %q", ErrServer, sanitize(b[:12]))
	}
	if _, err := rw.Write([]byte("RFB 003.008\n")); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c.r, b[:1]); err != nil {
		return nil, err
	}
	if b[0] == 0 {
		return nil, c.reason("no security types")
	}
	types := make([]byte, b[0])
	if _, err := io.ReadFull(c.r, types); err != nil {
		return nil, err
	}
	none := false
	for _, t := range types {
		none = none || t == 1
	}
	if !none {
		return nil, fmt.Errorf("%w: security types %v, no None", ErrServer, types)
	}
	if _, err := rw.Write([]byte{1}); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c.r, b[:4]); err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint32(b[:4]) != 0 {
		return nil, c.reason("security failed")
	}
	if _, err := rw.Write([]byte{1}); err != nil { // ClientInit: shared
		return nil, err
	}
	if _, err := io.ReadFull(c.r, b[:24]); err != nil {
		return nil, err
	}
	w, h := int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:]))
	if w == 0 || h == 0 || w > maxScreen || h > maxScreen {
		return nil, fmt.Errorf("%w: framebuffer %dx%d", ErrServer, w, h)
	}
	if err := c.skip(uint64(binary.BigEndian.Uint32(b[20:])), maxServerName); err != nil {
		return nil, err
	}
	c.size(w, h, width)
	msg := append([]byte{MsgSetPixelFormat, 0, 0, 0}, pixelFormat[:]...)
	// ZRLE first: Xvnc sends a changed screen of text in tens of KB
	// instead of megabytes in Raw; Raw stays for a server without it.
	msg = append(msg, MsgSetEncodings, 0, 0, 3, 0, 0, 0, encZRLE, 0, 0, 0, encCopyRect, 0, 0, 0, encRaw)
	msg = AppendRequest(msg, false, image.Rect(0, 0, w, h))
	if _, err := rw.Write(msg); err != nil {
		return nil, err
	}
	return c, nil
}

// reason reads a refusal's reason string and returns it as an error.
func (c *Client) reason(what string) error {
	var b [4]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		return fmt.Errorf("%w: %s", ErrServer, what)
	}
	n := binary.BigEndian.Uint32(b[:])
	if n > maxServerName {
		return fmt.Errorf("%w: %s", ErrServer, what)
	}
	msg := make([]byte, n)
	io.ReadFull(c.r, msg)
	return fmt.Errorf("%w: %s: %q", ErrServer, what, sanitize(msg))
}

// size sets up the tile for a w×h desktop and a tile at most width wide
// and as high (a tall screen makes a narrower tile).
func (c *Client) size(w, h, width int) {
	tw := min(w, width)
	th := max(1, (h*tw+w/2)/w)
	if th > width {
		th, tw = width, max(1, w*width/h)
	}
	c.Width, c.Height = w, h
	c.Pic = image.NewYCbCr(image.Rect(0, 0, tw, th), image.YCbCrSubsampleRatio420)
	for i := range c.Pic.Cb { // black
		c.Pic.Cb[i], c.Pic.Cr[i] = 128, 128
	}
	c.colOf, c.rowOf = blocks(w, tw), blocks(h, th)
	c.colEnd = make([]int32, tw)
	for x, i := range c.colOf {
		c.colEnd[i] = int32(x + 1)
	}
	c.row = make([]byte, 0, 4*w)
	c.acc = make([]uint32, 4*tw)
	c.Dirty = true // the first update makes the first picture, even of a black screen
}

// blocks maps n source positions onto m ≤ n blocks of about n/m each.
func blocks(n, m int) []int32 {
	of := make([]int32, n)
	for i := range of {
		of[i] = int32(i * m / n)
	}
	return of
}

// request asks for an incremental update of the whole desktop, and a
// non-incremental one of the area a CopyRect left approximate.
func (c *Client) Request(dst []byte) []byte {
	dst = AppendRequest(dst, true, image.Rect(0, 0, c.Width, c.Height))
	if !c.Refresh.Empty() {
		dst = AppendRequest(dst, false, c.Refresh)
		c.Refresh = image.Rectangle{}
	}
	return dst
}

// AppendRequest appends a FramebufferUpdateRequest for r.
func AppendRequest(dst []byte, incremental bool, r image.Rectangle) []byte {
	inc := byte(0)
	if incremental {
		inc = 1
	}
	dst = append(dst, MsgFramebufferUpdateRequest, inc)
	for _, v := range []int{r.Min.X, r.Min.Y, r.Dx(), r.Dy()} {
		dst = binary.BigEndian.AppendUint16(dst, uint16(v))
	}
	return dst
}

// next reads one server message and applies it; update says it was a
// FramebufferUpdate (the answer to a request).
func (c *Client) Next() (update bool, err error) {
	typ, err := c.r.ReadByte()
	if err != nil {
		return false, err
	}
	var b [12]byte
	switch typ {
	case rfbFramebufferUpdate:
		if _, err := io.ReadFull(c.r, b[:3]); err != nil {
			return false, err
		}
		for n := binary.BigEndian.Uint16(b[1:]); n > 0; n-- {
			if err := c.rect(); err != nil {
				return false, err
			}
		}
		return true, nil
	case rfbSetColourMapEntries:
		if _, err := io.ReadFull(c.r, b[:5]); err != nil {
			return false, err
		}
		return false, c.skip(6*uint64(binary.BigEndian.Uint16(b[3:])), 6*65536)
	case rfbBell:
		return false, nil
	case rfbServerCutText:
		if _, err := io.ReadFull(c.r, b[:7]); err != nil {
			return false, err
		}
		return false, c.skip(uint64(binary.BigEndian.Uint32(b[3:])), maxCutText)
	}
	return false, fmt.Errorf("%w: message type %d", ErrServer, typ)
}

// rect reads one rectangle of a FramebufferUpdate.
func (c *Client) rect() error {
	var b [12]byte
	if _, err := io.ReadFull(c.r, b[:12]); err != nil {
		return err
	}
	x, y := int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:]))
	w, h := int(binary.BigEndian.Uint16(b[4:])), int(binary.BigEndian.Uint16(b[6:]))
	enc := int32(binary.BigEndian.Uint32(b[8:]))
	if x+w > c.Width || y+h > c.Height {
		return fmt.Errorf("%w: rectangle %dx%d at %d,%d outside the %dx%d framebuffer", ErrServer, w, h, x, y, c.Width, c.Height)
	}
	switch enc {
	case encRaw:
		return c.raw(x, y, w, h)
	case encZRLE:
		if c.z == nil {
			c.z = new(zrleDecoder)
		}
		return c.z.rect(c.r, w, h, func(tx, ty, tw, th int, row func(int) []byte) error {
			return c.average(x+tx, y+ty, tw, th, func(i int) ([]byte, error) { return row(i), nil })
		})
	case encCopyRect:
		if _, err := io.ReadFull(c.r, b[:4]); err != nil {
			return err
		}
		sx, sy := int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:]))
		if sx+w > c.Width || sy+h > c.Height {
			return fmt.Errorf("%w: CopyRect source outside the framebuffer", ErrServer)
		}
		c.copyRect(x, y, w, h)
		return nil
	}
	return fmt.Errorf("%w: encoding %d, asked for ZRLE, CopyRect and Raw", ErrServer, enc)
}

// raw reads a Raw rectangle row by row and averages it into the tile.
func (c *Client) raw(x, y, w, h int) error {
	row := c.row[:4*w]
	return c.average(x, y, w, h, func(int) ([]byte, error) {
		_, err := io.ReadFull(c.r, row)
		return row, err
	})
}

// average takes the rows of a w×h desktop rectangle at x, y from next
// (4 bytes a pixel: R, G, B, unused) and averages them into the tile: the
// rows of one tile row's blocks add up in acc, and each tile pixel the
// rectangle touched becomes their mean when the rectangle leaves the tile
// row.
func (c *Client) average(x, y, w, h int, next func(i int) ([]byte, error)) error {
	if w == 0 || h == 0 {
		return nil
	}
	i0, i1 := c.colOf[x], c.colOf[x+w-1]
	acc := c.acc[4*i0 : 4*(i1+1)]
	clear(acc)
	for yy := y; yy < y+h; yy++ {
		row, err := next(yy - y)
		if err != nil {
			return err
		}
		k := 0 // the rectangle's column
		for i := i0; i <= i1; i++ {
			end := min(int(c.colEnd[i])-x, w)
			var r, g, b uint32
			n := uint32(end - k)
			for ; k < end; k++ {
				p := row[4*k : 4*k+3 : 4*k+3]
				r += uint32(p[0])
				g += uint32(p[1])
				b += uint32(p[2])
			}
			a := acc[4*(i-i0) : 4*(i-i0)+4 : 4*(i-i0)+4]
			a[0] += r
			a[1] += g
			a[2] += b
			a[3] += n
		}
		if j := c.rowOf[yy]; yy == y+h-1 || c.rowOf[yy+1] != j {
			// A tile pixel sets its luma and its 2x2 block's chroma (the
			// last pixel written of a block gives it its colour).
			pic := c.Pic
			for k := 0; k < len(acc); k += 4 {
				a := acc[k : k+4 : k+4]
				lum, cb, cr := color.RGBToYCbCr(byte(a[0]/a[3]), byte(a[1]/a[3]), byte(a[2]/a[3]))
				i := int(i0) + k/4
				yo, co := int(j)*pic.YStride+i, int(j)/2*pic.CStride+i/2
				if pic.Y[yo] != lum || pic.Cb[co] != cb || pic.Cr[co] != cr {
					pic.Y[yo], pic.Cb[co], pic.Cr[co] = lum, cb, cr
					c.Dirty = true
				}
			}
			clear(acc)
		}
	}
	return nil
}

// copyRect remembers the rectangle to ask for again: the tile keeps no
// framebuffer to copy from, and a copy within the samples would cost the
// edge a tile's worth of work for 16 bytes from the desktop.
func (c *Client) copyRect(x, y, w, h int) {
	if w > 0 && h > 0 {
		c.Refresh = c.Refresh.Union(image.Rect(x, y, x+w, y+h))
	}
}

// skip reads n bytes away, refusing more than limit.
func (c *Client) skip(n, limit uint64) error {
	if n > limit {
		return fmt.Errorf("%w: %d bytes to skip (at most %d)", ErrServer, n, limit)
	}
	_, err := c.r.Discard(int(n))
	return err
}

// ZRLE reports whether the server has sent a ZRLE rectangle yet.
func (c *Client) ZRLE() bool { return c.z != nil }
