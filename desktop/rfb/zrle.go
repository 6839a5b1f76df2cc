package rfb

import (
	"bufio"
	"compress/flate"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
)

// ZRLE (RFB 3.8 §7.7.6; RFC 6143 §7.7.6), as the wall's tiles ask for it:
// a rectangle is a 4-byte length and that many bytes of one zlib stream
// that runs through the whole connection; inflated, it is 64x64 tiles,
// left to right and top to bottom, each a subencoding byte and its data in
// CPIXELs (3 bytes here: with the client's 32 bpp, depth 24 format, the
// pixel's three low bytes, R, G, B).
//
// The decoder is hostile-proof by construction: every count it reads
// (palette size, run length, index) is checked against the tile it is
// in, so what it inflates is bounded by the rectangle's pixels, never by
// what the server claims; a rectangle's compressed length is bounded by
// maxZRLE; it allocates nothing per rectangle.

const (
	encZRLE = 16

	zrleTile = 64
	// maxZRLE bounds one rectangle's compressed bytes: a whole 8192x8192
	// screen of random pixels in raw tiles, with zlib's overhead.
	maxZRLE = 3*maxScreen*maxScreen + maxScreen*maxScreen/4096 + 1<<20
	// maxZRLETail bounds the compressed bytes a rectangle may leave after
	// its last tile (the end of a flush that inflating it did not need).
	maxZRLETail = 64
)

// zrleDecoder is one connection's ZRLE state.
type zrleDecoder struct {
	src  zrleSource
	zr   io.ReadCloser // the connection's zlib stream; nil until the first rectangle
	in   *bufio.Reader // what zr inflates
	tile [4 * zrleTile * zrleTile]byte
	pal  [128][3]byte
}

// zrleSource gives the zlib stream the current rectangle's bytes, after
// what earlier ones left: it ends (io.EOF) where the rectangle does.
type zrleSource struct {
	r     *bufio.Reader
	left  int
	carry []byte
	tail  [maxZRLETail]byte
}

func (s *zrleSource) ReadByte() (byte, error) {
	if len(s.carry) > 0 {
		b := s.carry[0]
		s.carry = s.carry[1:]
		return b, nil
	}
	if s.left == 0 {
		return 0, io.EOF
	}
	b, err := s.r.ReadByte()
	if err == nil {
		s.left--
	}
	return b, err
}

func (s *zrleSource) Read(p []byte) (int, error) {
	if len(s.carry) > 0 {
		n := copy(p, s.carry)
		s.carry = s.carry[n:]
		return n, nil
	}
	if s.left == 0 {
		return 0, io.EOF
	}
	if len(p) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= n
	return n, err
}

// rect reads one ZRLE rectangle of w×h pixels from r (its length and
// data) and hands each decoded tile to put: its place and size in the
// rectangle and its rows, 4 bytes a pixel (R, G, B, unused).
func (z *zrleDecoder) rect(r *bufio.Reader, w, h int, put func(x, y, w, h int, row func(i int) []byte) error) error {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	n := int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	if n > maxZRLE {
		return fmt.Errorf("%w: ZRLE rectangle of %d bytes", ErrServer, n)
	}
	z.src.r, z.src.left = r, n
	if z.zr == nil {
		if n == 0 {
			return fmt.Errorf("%w: empty ZRLE rectangle", ErrServer)
		}
		zr, err := zlib.NewReader(&z.src)
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return fmt.Errorf("%w: ZRLE rectangle ends inside its tiles", ErrServer)
			}
			return fmt.Errorf("%w: ZRLE: %v", ErrServer, err)
		}
		z.zr, z.in = zr, bufio.NewReaderSize(zr, 4096)
	}
	for ty := 0; ty < h; ty += zrleTile {
		th := min(zrleTile, h-ty)
		for tx := 0; tx < w; tx += zrleTile {
			tw := min(zrleTile, w-tx)
			if err := z.decodeTile(tw, th); err != nil {
				var corrupt flate.CorruptInputError
				switch {
				case err == io.EOF || err == io.ErrUnexpectedEOF:
					err = fmt.Errorf("%w: ZRLE rectangle ends inside its tiles", ErrServer)
				case errors.As(err, &corrupt) || errors.Is(err, zlib.ErrHeader) || errors.Is(err, zlib.ErrDictionary):
					err = fmt.Errorf("%w: ZRLE: %v", ErrServer, err)
				}
				return err
			}
			stride := 4 * tw
			if err := put(tx, ty, tw, th, func(i int) []byte { return z.tile[i*stride : (i+1)*stride] }); err != nil {
				return err
			}
		}
	}
	if n := z.in.Buffered(); n > 0 {
		return fmt.Errorf("%w: ZRLE rectangle has %d bytes after its tiles", ErrServer, n)
	}
	// What the rectangle has left is the end of its flush: keep it for
	// the next one.
	if z.src.left > maxZRLETail-len(z.src.carry) {
		return fmt.Errorf("%w: ZRLE rectangle has %d bytes after its tiles", ErrServer, z.src.left)
	}
	k := copy(z.src.tail[:], z.src.carry)
	if _, err := io.ReadFull(r, z.src.tail[k:k+z.src.left]); err != nil {
		return err
	}
	z.src.carry = z.src.tail[:k+z.src.left]
	z.src.left = 0
	return nil
}

// decodeTile inflates one w×h tile into z.tile.
func (z *zrleDecoder) decodeTile(w, h int) error {
	in := z.in
	sub, err := in.ReadByte()
	if err != nil {
		return err
	}
	pix := z.tile[:4*w*h]
	switch {
	case sub == 0: // raw CPIXELs
		for i := 0; i < len(pix); i += 4 {
			if err := z.cpixel(pix[i : i+3]); err != nil {
				return err
			}
		}
	case sub == 1: // solid
		var c [3]byte
		if err := z.cpixel(c[:]); err != nil {
			return err
		}
		for i := 0; i < len(pix); i += 4 {
			pix[i], pix[i+1], pix[i+2] = c[0], c[1], c[2]
		}
	case sub <= 16: // packed palette
		size := int(sub)
		if err := z.palette(size); err != nil {
			return err
		}
		bits := 4
		switch {
		case size == 2:
			bits = 1
		case size <= 4:
			bits = 2
		}
		mask := byte(1<<bits - 1)
		for y := 0; y < h; y++ {
			var cur byte
			left := 0 // bits of cur not yet used
			for x := 0; x < w; x++ {
				if left == 0 {
					if cur, err = in.ReadByte(); err != nil {
						return err
					}
					left = 8
				}
				left -= bits
				idx := int(cur >> left & mask)
				if idx >= size {
					return fmt.Errorf("%w: ZRLE palette index %d of %d", ErrServer, idx, size)
				}
				p := pix[4*(y*w+x):]
				p[0], p[1], p[2] = z.pal[idx][0], z.pal[idx][1], z.pal[idx][2]
			}
		}
	case sub == 128: // plain RLE
		for i := 0; i < len(pix); {
			var c [3]byte
			if err := z.cpixel(c[:]); err != nil {
				return err
			}
			n, err := z.run(len(pix)/4 - i/4)
			if err != nil {
				return err
			}
			for end := i + 4*n; i < end; i += 4 {
				pix[i], pix[i+1], pix[i+2] = c[0], c[1], c[2]
			}
		}
	case sub >= 130: // palette RLE
		size := int(sub) - 128
		if err := z.palette(size); err != nil {
			return err
		}
		for i := 0; i < len(pix); {
			idx, err := in.ReadByte()
			if err != nil {
				return err
			}
			n := 1
			if idx&128 != 0 {
				idx &= 127
				if n, err = z.run(len(pix)/4 - i/4); err != nil {
					return err
				}
			}
			if int(idx) >= size {
				return fmt.Errorf("%w: ZRLE palette index %d of %d", ErrServer, idx, size)
			}
			c := z.pal[idx]
			for end := i + 4*n; i < end; i += 4 {
				pix[i], pix[i+1], pix[i+2] = c[0], c[1], c[2]
			}
		}
	default:
		return fmt.Errorf("%w: ZRLE subencoding %d", ErrServer, sub)
	}
	return nil
}

func (z *zrleDecoder) cpixel(dst []byte) error {
	_, err := io.ReadFull(z.in, dst[:3])
	return err
}

func (z *zrleDecoder) palette(size int) error {
	for i := range size {
		if err := z.cpixel(z.pal[i][:]); err != nil {
			return err
		}
	}
	return nil
}

// run reads a run length (1 + the sum of bytes up to one that is not
// 255), at most limit.
func (z *zrleDecoder) run(limit int) (int, error) {
	n := 1
	for {
		b, err := z.in.ReadByte()
		if err != nil {
			return 0, err
		}
		n += int(b)
		if n > limit {
			return 0, fmt.Errorf("%w: ZRLE run of %d or more pixels where %d are left", ErrServer, n, limit)
		}
		if b != 255 {
			return n, nil
		}
	}
}
