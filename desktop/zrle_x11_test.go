package desktop

import (
	"fmt"
	"net"
	"testing"
	"time"

	"froog.tech/froog/desktop/rfb"
	"froog.tech/froog/internal/testkit"
)

// Xvnc takes the tile client's ZRLE: the first picture comes in ZRLE
// rectangles, decoded to the desktop's colour.
func TestTileClientXvncZRLE(t *testing.T) {
	port, _ := xDesktop(t, 640, 360, "#00ff00")
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	c, err := rfb.NewClient(conn, 480)
	if err != nil {
		t.Fatal(err)
	}
	for {
		up, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if up {
			break
		}
	}
	if !c.ZRLE() {
		t.Fatal("the first update had no ZRLE rectangle")
	}
	if got := testkit.RGBAt(c.Pic, 120, 70); !testkit.Near(got, [3]byte{0, 255, 0}) {
		t.Errorf("pixel 120,70: %v, want green", got)
	}
}
