package froog

import "context"

// Ports lists the ports open on its IPv6 address: those opened with
// OpenPort and its public URLs' TCP ports.
func (h *SandboxHandle) Ports(ctx context.Context) (*OpenPorts, error) {
	res, err := h.c.ListPortsWithResponse(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// OpenPort opens port (protocol "tcp" or "udp"; "" is tcp) on its IPv6
// address, in froog's firewall, and returns what is open then.
func (h *SandboxHandle) OpenPort(ctx context.Context, port int, protocol string) (*OpenPorts, error) {
	body := PortSpec{Port: port}
	if protocol != "" {
		body.Protocol = Ptr(PortSpecProtocol(protocol))
	}
	res, err := h.c.OpenPortWithResponse(ctx, h.Name, body)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// SetPorts replaces the ports opened with OpenPort (nil closes them all).
func (h *SandboxHandle) SetPorts(ctx context.Context, ports []PortSpec) (*OpenPorts, error) {
	if ports == nil {
		ports = []PortSpec{}
	}
	res, err := h.c.SetPortsWithResponse(ctx, h.Name, SetPortsJSONRequestBody{Ports: ports})
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// ClosePort closes a port opened with OpenPort ("" is tcp).
func (h *SandboxHandle) ClosePort(ctx context.Context, port int, protocol string) (*OpenPorts, error) {
	if protocol == "" {
		protocol = "tcp"
	}
	res, err := h.c.ClosePortWithResponse(ctx, h.Name, port, protocol)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}
