package rfb

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"testing"
)

// zrleStream makes a server's ZRLE rectangles: one zlib stream, flushed
// at each rectangle's end, as Xvnc does.
type zrleStream struct {
	buf bytes.Buffer
	zw  *zlib.Writer
}

func newZRLEStream() *zrleStream {
	s := &zrleStream{}
	s.zw = zlib.NewWriter(&s.buf)
	return s
}

// rect returns one rectangle's bytes (length and data) for the inflated
// tiles data.
func (s *zrleStream) rect(data []byte) []byte {
	s.zw.Write(data)
	s.zw.Flush()
	out := binary.BigEndian.AppendUint32(nil, uint32(s.buf.Len()))
	out = append(out, s.buf.Bytes()...)
	s.buf.Reset()
	return out
}

// decodeZRLE decodes rectangles of w×h from stream into a picture.
func decodeZRLE(stream []byte, w, h, rects int) (*image.RGBA, error) {
	var z zrleDecoder
	r := bufio.NewReader(bytes.NewReader(stream))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for range rects {
		err := z.rect(r, w, h, func(x, y, tw, th int, row func(int) []byte) error {
			if x < 0 || y < 0 || x+tw > w || y+th > h || tw > zrleTile || th > zrleTile {
				panic("tile outside its rectangle")
			}
			for i := range th {
				p := row(i)
				if len(p) != 4*tw {
					panic("row of the wrong length")
				}
				for k := range tw {
					img.Set(x+k, y+i, color.RGBA{p[4*k], p[4*k+1], p[4*k+2], 255})
				}
			}
			return nil
		})
		if err != nil {
			return img, err
		}
	}
	if _, err := r.ReadByte(); err == nil {
		return img, errors.New("bytes left after the rectangles")
	}
	return img, nil
}

var (
	red   = []byte{255, 0, 0}
	green = []byte{0, 255, 0}
	blue  = []byte{0, 0, 255}
	white = []byte{255, 255, 255}
)

func zcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestZRLEDecode(t *testing.T) {
	type px = []byte
	tests := []struct {
		name string
		w, h int
		data []byte                // the inflated tiles
		want func(x, y int) []byte // expected colour at x, y
	}{
		{"solid", 64, 64, zcat([]byte{1}, red), func(x, y int) px { return red }},
		{"solid tiles of an odd rectangle", 100, 70, zcat([]byte{1}, red, []byte{1}, green, []byte{1}, blue, []byte{1}, white),
			func(x, y int) px {
				return [][]byte{red, green, blue, white}[2*(y/64)+x/64]
			}},
		{"raw", 3, 2, zcat([]byte{0}, red, green, blue, white, red, green), func(x, y int) px {
			return [][]byte{red, green, blue, white, red, green}[3*y+x]
		}},
		{"packed palette of 2, rows padded", 10, 2, zcat([]byte{2}, red, blue, []byte{0b10101010, 0b10000000, 0b01010101, 0b01000000}),
			func(x, y int) px {
				if (x+y)%2 == 0 {
					return blue
				}
				return red
			}},
		{"packed palette of 3", 5, 1, zcat([]byte{3}, red, green, blue, []byte{0b00011000, 0b01000000}),
			func(x, y int) px { return [][]byte{red, green, blue, red, green}[x] }},
		{"packed palette of 5", 3, 1, zcat([]byte{5}, red, green, blue, white, red, []byte{0x31, 0x20}),
			func(x, y int) px { return [][]byte{white, green, blue}[x] }},
		{"plain RLE, a run over 255", 20, 16, zcat([]byte{128}, red, []byte{255, 44}, blue, []byte{19}),
			func(x, y int) px {
				if 20*y+x < 300 {
					return red
				}
				return blue
			}},
		{"palette RLE, runs and single pixels", 4, 2, zcat([]byte{130}, green, white, []byte{0x80 | 1, 2, 0, 0x80, 0, 0, 0, 1}),
			func(x, y int) px { return [][]byte{white, white, white, green, green, green, green, white}[4*y+x] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newZRLEStream()
			// Twice through the same stream: the second rectangle goes on
			// where the first left the zlib stream.
			img, err := decodeZRLE(zcat(s.rect(tt.data), s.rect(tt.data)), tt.w, tt.h, 2)
			if err != nil {
				t.Fatal(err)
			}
			for y := range tt.h {
				for x := range tt.w {
					c, want := img.RGBAAt(x, y), tt.want(x, y)
					if c.R != want[0] || c.G != want[1] || c.B != want[2] {
						t.Fatalf("pixel %d,%d = %v, want %v", x, y, c, want)
					}
				}
			}
		})
	}
}

func TestZRLEDecodeRefuses(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, maxZRLE+1)
	tests := []struct {
		name   string
		w, h   int
		stream func(s *zrleStream) []byte
	}{
		{"palette index out of range", 4, 1, func(s *zrleStream) []byte { return s.rect(zcat([]byte{3}, red, blue, green, []byte{0b00111000})) }},
		{"palette RLE index out of range", 4, 1, func(s *zrleStream) []byte { return s.rect(zcat([]byte{130}, red, blue, []byte{0x85, 3})) }},
		{"run longer than the tile", 4, 1, func(s *zrleStream) []byte { return s.rect(zcat([]byte{128}, red, []byte{4})) }},
		{"runs of 255 beyond the tile", 64, 64, func(s *zrleStream) []byte {
			return s.rect(zcat([]byte{128}, red, bytes.Repeat([]byte{255}, 100)))
		}},
		{"unused subencoding", 4, 1, func(s *zrleStream) []byte { return s.rect([]byte{17}) }},
		{"unused subencoding 129", 4, 1, func(s *zrleStream) []byte { return s.rect([]byte{129}) }},
		{"tiles cut short", 64, 64, func(s *zrleStream) []byte { return s.rect(zcat([]byte{0}, red, green)) }},
		{"length beyond the limit", 4, 1, func(s *zrleStream) []byte { return huge }},
		{"not zlib", 4, 1, func(s *zrleStream) []byte { return []byte{0, 0, 0, 4, 1, 2, 3, 4} }},
		{"empty first rectangle", 4, 1, func(s *zrleStream) []byte { return []byte{0, 0, 0, 0} }},
		{"bytes after the tiles", 4, 1, func(s *zrleStream) []byte {
			r := s.rect(zcat([]byte{1}, red, bytes.Repeat([]byte{7}, 5000)))
			return r
		}},
		{"stream cut", 4, 1, func(s *zrleStream) []byte { r := s.rect(zcat([]byte{1}, red)); return r[:len(r)-3] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeZRLE(tt.stream(newZRLEStream()), tt.w, tt.h, 1)
			if err == nil {
				t.Fatal("decoded")
			}
			t.Log(err)
		})
	}
}

// FuzzZRLE: whatever a server sends as ZRLE, the decoder returns an
// error or pictures within the rectangle; never a panic. The seeds are
// inflated data (compressed by the fuzz target, so the fuzzer reaches the
// tile parser) and raw stream bytes.
func FuzzZRLE(f *testing.F) {
	f.Add(uint8(64), uint8(64), true, zcat([]byte{1}, red))
	f.Add(uint8(10), uint8(2), true, zcat([]byte{2}, red, blue, []byte{0b10101010, 0b10000000, 0b01010101, 0b01000000}))
	f.Add(uint8(20), uint8(16), true, zcat([]byte{128}, red, []byte{255, 44}, blue, []byte{19}))
	f.Add(uint8(4), uint8(2), true, zcat([]byte{130}, green, white, []byte{0x80 | 1, 2, 0, 0x80, 0, 0, 0, 1}))
	f.Add(uint8(3), uint8(2), true, zcat([]byte{0}, red, green, blue, white, red, green))
	f.Add(uint8(4), uint8(1), false, newZRLEStream().rect(zcat([]byte{1}, red)))
	f.Fuzz(func(t *testing.T, w, h uint8, inflated bool, data []byte) {
		if w == 0 || h == 0 {
			return
		}
		stream := data
		if inflated {
			stream = newZRLEStream().rect(data)
		}
		decodeZRLE(stream, int(w)+100*int(w%2), int(h), 2)
	})
}
