package guest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// solidPNG encodes a w×h picture of one colour.
func solidPNG(t testing.TB, w, h int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withSize is p with its header saying w×h (and a right checksum), the
// pixels unchanged: what a decompression bomb's header looks like.
func withSize(p []byte, w, h uint32) []byte {
	q := bytes.Clone(p)
	// signature (8), IHDR length (4), "IHDR" (4), width, height, ...
	binary.BigEndian.PutUint32(q[16:], w)
	binary.BigEndian.PutUint32(q[20:], h)
	binary.BigEndian.PutUint32(q[29:], crc32.ChecksumIEEE(q[12:29]))
	return q
}

func TestValidateWallpaper(t *testing.T) {
	red := color.RGBA{255, 0, 0, 255}
	ok := solidPNG(t, 64, 36, red)
	big := make([]byte, MaxWallpaperBytes+1)
	copy(big, ok)
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"small PNG", ok, true},
		{"one pixel", solidPNG(t, 1, 1, red), true},
		{"8192 a side, within the pixels", withSize(solidPNG(t, 8192, 2, red), 8192, 2), true},
		{"empty", nil, false},
		{"not a PNG", []byte("GIF89a not a png at all"), false},
		{"JPEG magic", []byte("\xff\xd8\xff\xe0\x00\x10JFIF"), false},
		{"truncated", ok[:len(ok)-20], false},
		{"header only", ok[:33], false},
		{"bad checksum", append(bytes.Clone(ok[:29]), append([]byte{0, 0, 0, 0}, ok[33:]...)...), false},
		{"over 16 MiB", big, false},
		{"wider than 8192", withSize(ok, 8193, 1), false},
		{"taller than 8192", withSize(ok, 1, 8193), false},
		{"more than 16,777,216 pixels", withSize(ok, 8192, 2049), false},
		{"bomb header, small file", withSize(ok, 8192, 8192), false},
		{"pixels do not match the header", withSize(ok, 4096, 4096), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateWallpaper(tc.data)
			if (err == nil) != tc.ok {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrWallpaper) {
				t.Fatalf("got %v, want an ErrWallpaper", err)
			}
		})
	}
}

func FuzzWallpaper(f *testing.F) {
	ok := solidPNG(f, 16, 9, color.RGBA{0, 128, 255, 255})
	for _, s := range [][]byte{
		ok, solidPNG(f, 1, 1, color.RGBA{}), withSize(ok, 8193, 1), withSize(ok, 8192, 8192),
		withSize(ok, 0, 0), ok[:33], ok[:8], []byte("not a png"), nil,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ValidateWallpaper(data)
		if err != nil {
			if !errors.Is(err, ErrWallpaper) {
				t.Fatalf("got %v, want an ErrWallpaper", err)
			}
			return
		}
		// Whatever passes is a PNG within the limits.
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("accepted, but DecodeConfig: %v", err)
		}
		if len(data) > MaxWallpaperBytes || cfg.Width > MaxWallpaperSide || cfg.Height > MaxWallpaperSide || cfg.Width*cfg.Height > MaxWallpaperPixels {
			t.Fatalf("accepted %d bytes, %dx%d", len(data), cfg.Width, cfg.Height)
		}
	})
}
