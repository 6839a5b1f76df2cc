package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Port protocols.
const (
	ProtoTCP = "tcp"
	ProtoUDP = "udp"
)

// MaxPortsPerSandbox is how many ports a sandbox may have open on its
// IPv6 address, its public URLs' TCP ports included.
const MaxPortsPerSandbox = 64

// ErrBadPort: a port outside 1-65535, or a protocol other than tcp and udp.
var ErrBadPort = errors.New("bad port")

// Port is one port a sandbox has open on its IPv6 address: the host's
// firewall lets inbound connections to it through.
type Port struct {
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
}

func (p Port) String() string { return strconv.Itoa(p.Port) + "/" + p.Protocol }

// Check says what is wrong with p, if anything (ErrBadPort).
func (p Port) Check() error {
	if p.Port < 1 || p.Port > 65535 {
		return fmt.Errorf("port %d: must be 1-65535: %w", p.Port, ErrBadPort)
	}
	if p.Protocol != ProtoTCP && p.Protocol != ProtoUDP {
		return fmt.Errorf("protocol %q: must be tcp or udp: %w", p.Protocol, ErrBadPort)
	}
	return nil
}

// ParsePort reads PORT or PORT/PROTOCOL (tcp when left out), as the CLI
// and the API's paths write a port.
func ParsePort(s string) (Port, error) {
	num, proto, ok := strings.Cut(s, "/")
	if !ok {
		proto = ProtoTCP
	}
	n, err := strconv.Atoi(num)
	if err != nil || num == "" || num[0] == '+' || num[0] == '-' {
		return Port{}, fmt.Errorf("port %q: not a number: %w", num, ErrBadPort)
	}
	p := Port{Port: n, Protocol: proto}
	return p, p.Check()
}

// ComparePorts orders ports by number, then protocol.
func ComparePorts(a, b Port) int {
	return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
}

// NormalizePorts checks every port and returns them sorted, each once.
func NormalizePorts(ps []Port) ([]Port, error) {
	for _, p := range ps {
		if err := p.Check(); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(ps)
	slices.SortFunc(out, ComparePorts)
	return slices.Compact(out), nil
}

// EffectivePorts is what the firewall opens for a sandbox: its own ports
// and the TCP port of each of its public URLs, sorted, each once.
func EffectivePorts(own []Port, urls []URL) []Port {
	out := slices.Clone(own)
	for _, u := range urls {
		if u.Public {
			out = append(out, Port{Port: u.Port, Protocol: ProtoTCP})
		}
	}
	slices.SortFunc(out, ComparePorts)
	return slices.Compact(out)
}

// PublicPorts reads the TCP ports of a sandbox's public URLs, inside a
// write's transaction that holds the sandbox.
type PublicPorts interface {
	PublicURLPorts(ctx context.Context, sandboxID string) ([]int, error)
}

func portsOf(own []Port, public []int) []Port {
	urls := make([]URL, len(public))
	for i, p := range public {
		urls[i] = URL{Port: p, Public: true}
	}
	return EffectivePorts(own, urls)
}

// CheckPortsIn is the ports rule of every sandbox write, for every
// implementation: sb.Ports is checked and normalized, and a write that
// adds ports may not take the sandbox past MaxPortsPerSandbox (a
// LimitError), its public URLs' ports counted. A write that leaves them as
// they are, or only removes some, reads nothing. old is nil for a new
// sandbox.
func CheckPortsIn(ctx context.Context, tx PublicPorts, old, sb *Sandbox) error {
	var before []Port
	if old != nil {
		before = old.Ports
	}
	if slices.Equal(before, sb.Ports) {
		return nil
	}
	ports, err := NormalizePorts(sb.Ports)
	if err != nil {
		return err
	}
	if len(ports) == 0 {
		ports = nil
	}
	sb.Ports = ports
	grows := slices.ContainsFunc(ports, func(p Port) bool { return !slices.Contains(before, p) })
	if !grows {
		return nil
	}
	var public []int
	if old != nil {
		if public, err = tx.PublicURLPorts(ctx, sb.ID); err != nil {
			return err
		}
	}
	if n := len(portsOf(ports, public)); n > MaxPortsPerSandbox && n > len(portsOf(before, public)) {
		return &LimitError{Limit: "ports_per_sandbox", Max: MaxPortsPerSandbox}
	}
	return nil
}

// checkPublicURL is PutURLIn's ports rule: a URL that becomes public
// opens its TCP port, which may not take the sandbox past
// MaxPortsPerSandbox.
func checkPublicURL(ctx context.Context, tx PublicPorts, sb *Sandbox, port int) error {
	public, err := tx.PublicURLPorts(ctx, sb.ID)
	if err != nil {
		return err
	}
	before := portsOf(sb.Ports, public)
	if slices.Contains(before, Port{Port: port, Protocol: ProtoTCP}) {
		return nil
	}
	if len(before)+1 > MaxPortsPerSandbox {
		return &LimitError{Limit: "ports_per_sandbox", Max: MaxPortsPerSandbox}
	}
	return nil
}
