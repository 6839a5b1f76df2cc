package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Listener is one TCP socket listening inside a sandbox.
type Listener struct {
	Addr netip.Addr // 0.0.0.0 or :: for every address
	Port int
}

// listeningCommand prints the kernel's TCP socket tables; a guest without
// IPv6 has no tcp6 file, and the IPv4 one is enough.
const listeningCommand = "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"

// maxListeningOutput bounds what Listening reads: the tables list every
// TCP socket, connections too (about 150 bytes each).
const maxListeningOutput = 4 << 20

// Listening reads the sandbox's listening TCP sockets, in one exec
// session on its SSH connection (the one the tunnel's channels use),
// from /proc/net/tcp and /proc/net/tcp6. ctx bounds the whole read: the
// session is closed when it ends.
func (t *Tunnel) Listening(ctx context.Context, sandboxID string) (_ []Listener, err error) {
	// A read cut by ctx says so, whatever the cut session returned.
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("read listening sockets of sandbox %s: %w", sandboxID, ctx.Err())
		}
	}()
	s, err := t.Session(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	out, err := s.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("read listening sockets of sandbox %s: %w", sandboxID, err)
	}
	if err := s.Start(listeningCommand); err != nil {
		return nil, fmt.Errorf("read listening sockets of sandbox %s: %w", sandboxID, err)
	}
	b, err := io.ReadAll(io.LimitReader(out, maxListeningOutput))
	if ctx.Err() != nil {
		return nil, fmt.Errorf("read listening sockets of sandbox %s: %w", sandboxID, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("read listening sockets of sandbox %s: %w", sandboxID, err)
	}
	// The exit status is not read: cat fails when one of the files is
	// missing, and what it printed of the other is the answer.
	ls, err := ParseListening(b)
	if err != nil {
		return nil, fmt.Errorf("read listening sockets of sandbox %s: %w", sandboxID, err)
	}
	return ls, nil
}

// ParseListening gives the LISTEN sockets of the text of /proc/net/tcp
// and /proc/net/tcp6 (either, or both one after the other), sorted by
// port then address, each once. Lines that are not sockets (the files'
// headings) and sockets in other states are skipped; a socket line that
// cannot be read is an error. Addresses are read as a little-endian
// kernel prints them (x86-64 and arm64 guests): each 32-bit word in host
// order.
func ParseListening(b []byte) ([]Listener, error) {
	var ls []Listener
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasSuffix(f[0], ":") {
			continue // a heading, or a blank line
		}
		if f[3] != "0A" { // TCP_LISTEN
			continue
		}
		l, err := parseSocket(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		ls = append(ls, l)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(ls, func(a, b Listener) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		return a.Addr.Compare(b.Addr)
	})
	return slices.Compact(ls), nil
}

// parseSocket reads a local_address field: ADDR:PORT in hex, ADDR 8
// digits (IPv4) or 32 (IPv6).
func parseSocket(s string) (Listener, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(p) != 4 {
		return Listener{}, fmt.Errorf("local address %q is not ADDR:PORT", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return Listener{}, fmt.Errorf("local address %q: port: %w", s, err)
	}
	raw, err := hex.DecodeString(a)
	if err != nil || len(raw) != 4 && len(raw) != 16 {
		return Listener{}, fmt.Errorf("local address %q: the address is not 8 or 32 hex digits", s)
	}
	for i := 0; i < len(raw); i += 4 { // each word is in the kernel's order
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	// An IPv6 socket bound to ::ffff:127.0.0.1 takes IPv4 connections to
	// 127.0.0.1: it is that address.
	return Listener{Addr: addr.Unmap(), Port: int(port)}, nil
}
