package tunnel_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"froog.tech/froog/tunnel"
)

// A channel that ends because its SSH connection died says so; one the
// sandbox ends says io.EOF. (x/crypto/ssh gives io.EOF for both: a proxy
// would pass a cut body without a length on as complete.)
func TestChannelEndsTellLostFromDone(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  bool
		want error
	}{
		{"sandbox closes", false, io.EOF},
		{"connection lost", true, tunnel.ErrConnectionLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tunnel.Options{})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("part"))
				if !tc.cut {
					c.Close()
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := r.tun.DialContext(ctx, r.sb.ID, ln.Addr().(*net.TCPAddr).Port)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
				t.Fatal(err)
			}
			if tc.cut {
				r.proxy.cut()
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
