package api

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"froog.tech/froog/store"
)

// Open ports (the docs' Network): raw TCP or UDP ports on the sandbox's
// IPv6 address, let through by the host's firewall outside the VM. The
// API keeps the list on the sandbox (intent); hostctl has its driver
// open them, with the TCP ports of the sandbox's public URLs, whenever
// the sandbox runs and whenever they change.

// portView is one port the firewall lets through: Open when it was
// opened with these routes, PublicURL when a public URL of the sandbox
// opens it (it closes with the URL, not here).
type portView struct {
	Port      int    `json:"port"`
	Protocol  string `json:"protocol"`
	Open      bool   `json:"open"`
	PublicURL bool   `json:"public_url"`
}

// portsView is the answer of every ports route.
type portsView struct {
	Ports []portView `json:"ports"`
	// IPv6 is where they answer, while the sandbox runs.
	IPv6 *string `json:"ipv6"`
	Max  int     `json:"max"`
}

func viewPorts(sb *store.Sandbox, urls []store.URL) portsView {
	v := portsView{Ports: []portView{}, IPv6: ipv6View(sb), Max: store.MaxPortsPerSandbox}
	for _, p := range store.EffectivePorts(sb.Ports, urls) {
		pv := portView{Port: p.Port, Protocol: p.Protocol, Open: slices.Contains(sb.Ports, p)}
		pv.PublicURL = p.Protocol == store.ProtoTCP && slices.ContainsFunc(urls, func(u store.URL) bool { return u.Public && u.Port == p.Port })
		v.Ports = append(v.Ports, pv)
	}
	return v
}

// ipv6View is the sandbox's IPv6 address while it runs (a stopped one's
// next start may give it another), else null.
func ipv6View(sb *store.Sandbox) *string {
	if sb.IPv6 == "" || sb.State != store.StateRunning {
		return nil
	}
	a := sb.IPv6
	return &a
}

func (s *Server) writePorts(w http.ResponseWriter, r *http.Request, sb *store.Sandbox) error {
	urls, err := s.store.URLs(r.Context(), sb.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewPorts(sb, urls))
	return nil
}

func (s *Server) listPorts(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	return s.writePorts(w, r, sb)
}

// portRequest is one port in a request body; protocol tcp when absent.
type portRequest struct {
	Port     *int    `json:"port"`
	Protocol *string `json:"protocol"`
}

func (p portRequest) port(where string) (store.Port, error) {
	if p.Port == nil {
		return store.Port{}, badRequest("invalid_port", `%s: port is required, as in {"port": 27015, "protocol": "udp"}`, where)
	}
	out := store.Port{Port: *p.Port, Protocol: store.ProtoTCP}
	if p.Protocol != nil {
		out.Protocol = *p.Protocol
	}
	if out.Port < 1 || out.Port > 65535 {
		return store.Port{}, badRequest("invalid_port", "%s: the port must be a number from 1 to 65535, not %d", where, out.Port)
	}
	if out.Protocol != store.ProtoTCP && out.Protocol != store.ProtoUDP {
		return store.Port{}, badRequest("invalid_port", "%s: the protocol must be tcp or udp, not %s", where, strconv.Quote(out.Protocol))
	}
	return out, nil
}

// changePorts writes the sandbox's ports as fn makes them, with one
// audit event, and answers with the list.
func (s *Server) changePorts(w http.ResponseWriter, r *http.Request, sb *store.Sandbox, action string, detail map[string]string, fn func([]store.Port) ([]store.Port, error)) error {
	ev := s.audit(r, action, sb.Name, detail)
	up, err := s.store.UpdateSandbox(r.Context(), sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error {
		ports, err := fn(slices.Clone(x.Ports))
		x.Ports = ports
		return err
	}, ev)
	if errors.Is(err, store.ErrNotFound) {
		err = errorf(http.StatusNotFound, "not_found", "no sandbox named %q", sb.Name) // deleted since it was read
	}
	if err != nil {
		return err
	}
	return s.writePorts(w, r, &up)
}

func (s *Server) openPort(w http.ResponseWriter, r *http.Request) error {
	var req portRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	p, err := req.port("the request")
	if err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if slices.Contains(sb.Ports, p) {
		return s.writePorts(w, r, sb) // open already: nothing to record
	}
	return s.changePorts(w, r, sb, "port.open", map[string]string{"port": p.String()}, func(ports []store.Port) ([]store.Port, error) {
		return append(ports, p), nil
	})
}

type portsRequest struct {
	Ports *[]portRequest `json:"ports"`
}

func (s *Server) putPorts(w http.ResponseWriter, r *http.Request) error {
	var req portsRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Ports == nil {
		return badRequest("invalid_port", `ports is required: a list such as [{"port": 27015, "protocol": "udp"}], [] to close every one`)
	}
	if len(*req.Ports) > store.MaxPortsPerSandbox {
		return errorf(http.StatusConflict, "too_many_ports", "at most %d ports per sandbox, its public URLs' included, not %d", store.MaxPortsPerSandbox, len(*req.Ports))
	}
	var list []store.Port
	for i, pr := range *req.Ports {
		p, err := pr.port("ports[" + strconv.Itoa(i) + "]")
		if err != nil {
			return err
		}
		list = append(list, p)
	}
	list, _ = store.NormalizePorts(list)
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if slices.Equal(sb.Ports, list) {
		return s.writePorts(w, r, sb)
	}
	names := make([]string, len(list))
	for i, p := range list {
		names[i] = p.String()
	}
	return s.changePorts(w, r, sb, "port.set", map[string]string{"ports": strings.Join(names, ",")}, func([]store.Port) ([]store.Port, error) {
		return list, nil
	})
}

func (s *Server) closePort(w http.ResponseWriter, r *http.Request) error {
	p, err := store.ParsePort(r.PathValue("port") + "/" + r.PathValue("protocol"))
	if err != nil {
		return badRequest("invalid_port", "the path must end in /ports/PORT/PROTOCOL: a port from 1 to 65535, tcp or udp")
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	if !slices.Contains(sb.Ports, p) {
		urls, err := s.store.URLs(r.Context(), sb.ID)
		if err != nil {
			return err
		}
		if p.Protocol == store.ProtoTCP && slices.ContainsFunc(urls, func(u store.URL) bool { return u.Public && u.Port == p.Port }) {
			return errorf(http.StatusConflict, "port_from_url", "port %s is open because a public URL of %s serves it: remove the URL or make it private", p, sb.Name)
		}
		return errorf(http.StatusNotFound, "not_found", "port %s of %s is not open", p, sb.Name)
	}
	return s.changePorts(w, r, sb, "port.close", map[string]string{"port": p.String()}, func(ports []store.Port) ([]store.Port, error) {
		return slices.DeleteFunc(ports, func(o store.Port) bool { return o == p }), nil
	})
}
