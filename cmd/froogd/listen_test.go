package main

import (
	"net"
	"strconv"
	"testing"
)

// HTTP/3's UDP socket takes the HTTPS listener's port number. When UDP
// has that number in use, an HTTPS address of port 0 moves both to a
// number free for both; a port the operator named fails, saying so.
func TestListenQUICMovesOffAPortUDPHas(t *testing.T) {
	var taken net.PacketConn
	var tcp net.Listener
	for range 20 { // a UDP port whose number TCP has free
		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if tcp, err = net.Listen("tcp", udp.LocalAddr().String()); err == nil {
			taken = udp
			break
		}
		udp.Close()
	}
	if taken == nil {
		t.Fatal("found no port number free on TCP and taken on UDP")
	}
	defer taken.Close()
	p := &proc{}
	defer func() {
		for _, f := range p.closers {
			f()
		}
	}()
	if _, _, err := listenQUIC(p, tcp.Addr().String(), tcp); err == nil {
		t.Fatal("a named port whose number UDP has: no error")
	}
	tcp.Close()
	tcp, err := net.Listen("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ln, pc, err := listenQUIC(p, "127.0.0.1:0", tcp)
	if err != nil {
		t.Fatal(err)
	}
	tcpPort, udpPort := ln.Addr().(*net.TCPAddr).Port, pc.LocalAddr().(*net.UDPAddr).Port
	if tcpPort != udpPort || strconv.Itoa(udpPort) == portOf(taken) {
		t.Fatalf("HTTPS on %d, HTTP/3 on %d, UDP's port in use %s: want one number, another than the one in use", tcpPort, udpPort, portOf(taken))
	}
}

func portOf(pc net.PacketConn) string {
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	return port
}
