package testkit

import "image"

// RGBAt is the colour of img's pixel at x, y, 8 bits a channel.
func RGBAt(img image.Image, x, y int) [3]byte {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]byte{byte(r >> 8), byte(g >> 8), byte(b >> 8)}
}

// Near reports whether two colours are within JPEG's error of each other
// (24 a channel).
func Near(a, b [3]byte) bool {
	for i := range a {
		if d := int(a[i]) - int(b[i]); d > 24 || d < -24 {
			return false
		}
	}
	return true
}
