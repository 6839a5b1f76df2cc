package desktop

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
		c, err := newTileClient(&streamRW{Reader: bytes.NewReader(in)}, 480)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := c.next(); err != nil {
			b.Fatal(err)
		}
	}
}
