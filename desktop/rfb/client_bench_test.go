//go:build bench

package rfb

import (
	"bytes"
	"testing"
)

// BenchmarkTileRaw is the tile client's work for one whole 1920x1080
// screen in Raw: reading it and scaling it down to 480x270.
func BenchmarkTileRaw(b *testing.B) {
	frame := rawRect(0, 0, 1920, 1080, [3]byte{10, 20, 30})
	head := serverStream(1920, 1080)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		b.StopTimer()
		in := append(append([]byte(nil), head...), frame...)
		c, err := NewClient(&streamRW{Reader: bytes.NewReader(in)}, 480)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := c.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTileZRLE is the tile client's work for one whole 1920x1080
// screen of small text in ZRLE (two-colour packed palette tiles, as Xvnc
// sends text): inflating, decoding and scaling it down to 480x270.
func BenchmarkTileZRLE(b *testing.B) {
	const w, h = 1920, 1080
	s := newZRLEStream()
	var tiles []byte
	seed := uint32(1)
	for ty := 0; ty < h; ty += zrleTile {
		for tx := 0; tx < w; tx += zrleTile {
			tw, th := min(zrleTile, w-tx), min(zrleTile, h-ty)
			tiles = append(tiles, 2, 255, 255, 255, 20, 20, 20)
			for y := range th {
				for x := 0; x < tw; x += 8 {
					var bits byte
					if (ty+y)%16 < 11 { // text lines, 5 rows of space
						seed = seed*1664525 + 1013904223
						bits = byte(seed>>24) & byte(seed>>16) // about a quarter of the pixels ink
					}
					tiles = append(tiles, bits)
				}
			}
		}
	}
	head := serverStream(w, h)
	upd := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0x07, 0x80, 0x04, 0x38, 0, 0, 0, encZRLE}
	frame := append(upd, s.rect(tiles)...)
	b.Logf("%d bytes on the wire a screen (Raw: %d)", len(frame), 16+4*w*h)
	for b.Loop() {
		b.StopTimer()
		in := append(append([]byte(nil), head...), append(upd, newZRLEStream().rect(tiles)...)...)
		c, err := NewClient(&streamRW{Reader: bytes.NewReader(in)}, 480)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := c.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
