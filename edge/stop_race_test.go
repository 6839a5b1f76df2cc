package edge_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"froog.tech/froog/edge"
	"froog.tech/froog/edge/route"
)

// An edge stopped as it starts returns: each of its servers ends, even
// one whose Serve begins after the stop (a test that skips right after
// starting an edge waited on one for ever).
func TestServeTLSStoppedAtOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	st := r.st
	routes, err := route.New(route.Options{Store: st, Domain: domain, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := edge.New(edge.Options{Routes: routes, Sandboxes: st, Dialer: r.tun, GetCertificate: r.ca.GetCertificate, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { done <- srv.ServeTLS(ctx, ln) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("ServeTLS with its context ended did not return in a minute")
		}
	}
}
