package guest

import "froog.tech/froog/internal/testkit"

// screenPixel reads the colour of one pixel from the VNC server with no
// password on port, as a shared client.
func screenPixel(port, x, y int) ([3]byte, error) {
	c, err := testkit.DialRFB(port)
	if err != nil {
		return [3]byte{}, err
	}
	defer c.Close()
	return c.Pixel(x, y)
}
