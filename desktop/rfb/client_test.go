package rfb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"io"
	"testing"

	"froog.tech/froog/internal/testkit"
)

// serverStream is an RFB server's side as bytes: version, security None,
// ServerInit of w×h, then msgs.
func serverStream(w, h int, msgs ...[]byte) []byte {
	b := []byte("RFB 003.008\n\x01\x01\x00\x00\x00\x00")
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	b = append(b, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0, 0, 0, 0, 1, 'x')
	return append(b, bytes.Join(msgs, nil)...)
}

// rawRect is a FramebufferUpdate of one Raw rectangle of one colour, in
// the client's pixel format (R, G, B, X).
func rawRect(x, y, w, h int, c [3]byte) []byte {
	b := []byte{0, 0, 0, 1}
	for _, v := range []int{x, y, w, h} {
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	b = append(b, 0, 0, 0, encRaw)
	return append(b, bytes.Repeat([]byte{c[0], c[1], c[2], 0}, w*h)...)
}

// zrleSolid is a FramebufferUpdate of one ZRLE rectangle of one colour
// (solid tiles) through the connection's zlib stream s.
func zrleSolid(s *zrleStream, x, y, w, h int, c [3]byte) []byte {
	b := []byte{0, 0, 0, 1}
	for _, v := range []int{x, y, w, h} {
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	b = append(b, 0, 0, 0, encZRLE)
	tiles := ((w + zrleTile - 1) / zrleTile) * ((h + zrleTile - 1) / zrleTile)
	return append(b, s.rect(bytes.Repeat([]byte{1, c[0], c[1], c[2]}, tiles))...)
}

func copyRectMsg(x, y, w, h, sx, sy int) []byte {
	b := []byte{0, 0, 0, 1}
	for _, v := range []int{x, y, w, h} {
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	b = append(b, 0, 0, 0, encCopyRect)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, uint16(sx)), uint16(sy))
}

type streamRW struct {
	io.Reader
	out bytes.Buffer
}

func (s *streamRW) Write(p []byte) (int, error) { return s.out.Write(p) }

// The client's handshake, requests and its sampled picture, from bytes.
func TestTileClient(t *testing.T) {
	red, blue, green, white := [3]byte{255, 0, 0}, [3]byte{0, 0, 255}, [3]byte{0, 255, 0}, [3]byte{255, 255, 255}
	zs := newZRLEStream()
	in := serverStream(1920, 1080,
		rawRect(0, 0, 1920, 1080, red),
		[]byte{rfbBell},
		[]byte{rfbServerCutText, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c'},
		[]byte{rfbSetColourMapEntries, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6},
		rawRect(0, 0, 960, 540, blue),          // the top left quarter
		copyRectMsg(960, 540, 960, 540, 0, 0),  // copied to the bottom right: asked for again
		zrleSolid(zs, 0, 540, 960, 540, green), // the bottom left quarter
		zrleSolid(zs, 4, 0, 4, 4, white))       // one tile pixel's block, through the same zlib stream
	rw := &streamRW{Reader: bytes.NewReader(in)}
	c, err := NewClient(rw, 480)
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Pic.Bounds(); b.Dx() != 480 || b.Dy() != 270 {
		t.Fatalf("tile %v, want 480x270", b)
	}
	wantOut := append([]byte("RFB 003.008\n\x01\x01"), MsgSetPixelFormat, 0, 0, 0)
	wantOut = append(wantOut, pixelFormat[:]...)
	wantOut = append(wantOut, setEncodings(encZRLE, encCopyRect, encRaw)...)
	wantOut = append(wantOut, MsgFramebufferUpdateRequest, 0, 0, 0, 0, 0, 0x07, 0x80, 0x04, 0x38)
	if !bytes.Equal(rw.out.Bytes(), wantOut) {
		t.Errorf("client sent %v, want %v", rw.out.Bytes(), wantOut)
	}
	updates := 0
	for {
		up, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if up {
			updates++
		}
	}
	if updates != 5 {
		t.Errorf("%d updates, want 5", updates)
	}
	// Points inside each area: pixels at an area's edge share their 2x2
	// block's chroma with the next area (the picture is 4:2:0).
	for _, p := range []struct {
		x, y int
		want [3]byte
	}{{10, 10, blue}, {239, 133, blue}, {240, 10, red}, {10, 136, green}, {239, 269, green}, {470, 260, red}, {250, 140, red}, {1, 0, white}, {2, 0, blue}} {
		if got := testkit.RGBAt(c.Pic, p.x, p.y); !testkit.Near(got, p.want) {
			t.Errorf("pixel %d,%d: %v, want %v", p.x, p.y, got, p.want)
		}
	}
	if c.Refresh != image.Rect(960, 540, 1920, 1080) {
		t.Errorf("refresh %v after the CopyRect", c.Refresh)
	}
	out := c.Request(nil)
	if len(out) != 20 || out[1] != 1 || out[11] != 0 {
		t.Errorf("request %v: want an incremental and a non-incremental one", out)
	}

	for _, bad := range [][]byte{
		serverStream(0, 10),
		serverStream(9000, 10),
		[]byte("RFB 003.003\n"),
		[]byte("RFB 003.008\n\x01\x02"), // VNC auth only
		serverStream(10, 10, rawRect(5, 5, 10, 10, red)),
		serverStream(10, 10, []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 7}), // Tight, not asked for
		serverStream(10, 10, []byte{99}),
		serverStream(10, 10, []byte{rfbServerCutText, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}),
	} {
		c, err := NewClient(&streamRW{Reader: bytes.NewReader(bad)}, 480)
		for err == nil {
			_, err = c.Next()
		}
		if !errors.Is(err, ErrServer) {
			t.Errorf("%q: got %v, want a refusal", bad[min(len(bad), 12):], err)
		}
	}
}

// FuzzRFBClient feeds arbitrary server streams to the client: it must
// never panic, never hold more than its tile, and refuse or end.
func FuzzRFBClient(f *testing.F) {
	f.Add(serverStream(64, 48, rawRect(0, 0, 64, 48, [3]byte{1, 2, 3}), copyRectMsg(0, 0, 32, 24, 32, 24)), uint16(16))
	f.Add(serverStream(1, 1, []byte{rfbBell, rfbServerCutText, 0, 0, 0, 0, 0, 0, 0}), uint16(480))
	f.Add(serverStream(3, 7, rawRect(1, 2, 2, 5, [3]byte{9, 9, 9})), uint16(2))
	f.Fuzz(func(t *testing.T, in []byte, width uint16) {
		c, err := NewClient(&streamRW{Reader: bytes.NewReader(in)}, int(width%600)+1)
		if err != nil {
			return
		}
		size := len(c.Pic.Y)
		for i := 0; i < 1000 && err == nil; i++ {
			_, err = c.Next()
		}
		if b := c.Pic.Bounds(); len(c.Pic.Y) != size || b.Dx() > c.Width || b.Dy() > c.Height || b.Dx() > int(width%600)+1 || b.Dy() > int(width%600)+1 {
			t.Fatalf("tile changed size or is too big: %v for %dx%d", c.Pic.Bounds(), c.Width, c.Height)
		}
		if !c.Refresh.Empty() && !c.Refresh.In(image.Rect(0, 0, c.Width, c.Height)) {
			t.Fatalf("refresh %v outside the framebuffer", c.Refresh)
		}
	})
}
