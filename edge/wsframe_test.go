package edge

import (
	"bytes"
	"testing"
)

func frame(payload int, masked bool) []byte {
	var b bytes.Buffer
	b.WriteByte(0x82)
	mask := byte(0)
	if masked {
		mask = 0x80
	}
	switch {
	case payload < 126:
		b.WriteByte(mask | byte(payload))
	case payload < 1<<16:
		b.Write([]byte{mask | 126, byte(payload >> 8), byte(payload)})
	default:
		b.Write([]byte{mask | 127, 0, 0, 0, 0, byte(payload >> 24), byte(payload >> 16), byte(payload >> 8), byte(payload)})
	}
	if masked {
		b.Write([]byte{1, 2, 3, 4})
	}
	b.Write(make([]byte, payload))
	return b.Bytes()
}

// The edge finds websocket frame ends in any split of the stream.
func TestWSFrame(t *testing.T) {
	t.Parallel()
	var stream []byte
	var ends []int
	for _, f := range [][]byte{frame(0, false), frame(5, false), frame(125, false), frame(126, false), frame(70000, false), frame(3, true), {0x88, 0x00}} {
		stream = append(stream, f...)
		ends = append(ends, len(stream))
	}
	for _, piece := range []int{1, 2, 3, 7, 100, 1 << 20} {
		var f wsFrame
		for off := 0; off < len(stream); off += piece {
			end := min(off+piece, len(stream))
			want := -1
			for _, e := range ends {
				if e > off && e <= end {
					want = e - off
					break
				}
			}
			if got := f.feed(stream[off:end]); got != want {
				t.Fatalf("pieces of %d, at %d: first end %d, want %d", piece, off, got, want)
			}
		}
		if !f.boundary() {
			t.Fatalf("pieces of %d: a frame under way at the end", piece)
		}
	}
}

func FuzzWSFrame(f *testing.F) {
	f.Add(append(frame(5, false), frame(130, true)...), 3)
	f.Add([]byte{0x81, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1)
	f.Fuzz(func(t *testing.T, b []byte, piece int) {
		piece = max(1, piece%64)
		var whole, split wsFrame
		whole.feed(b)
		for off := 0; off < len(b); off += piece {
			split.feed(b[off:min(off+piece, len(b))])
		}
		if whole != split {
			t.Fatalf("whole %+v, in pieces of %d %+v", whole, piece, split)
		}
	})
}
