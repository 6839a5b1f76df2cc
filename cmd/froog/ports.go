package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// portProto reads PORT[/tcp|udp], tcp when the protocol is left out.
func portProto(s string) (int, string, error) {
	num, proto, ok := strings.Cut(s, "/")
	if !ok {
		proto = "tcp"
	}
	n, err := portArg(num)
	if err != nil || (proto != "tcp" && proto != "udp") {
		return 0, "", fmt.Errorf("%q is not PORT, PORT/tcp or PORT/udp (a port from 1 to 65535)", s)
	}
	return n, proto, nil
}

func (a *app) portCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "port open|close|list",
		Short: "Open or close a raw port on the sandbox's IPv6 address (TCP unless /udp)",
		Long: `Open a raw TCP or UDP port on the sandbox's own IPv6 address, for a game
server, a database or anything else that isn't HTTPS. The rule is in froog's
firewall, outside the sandbox; open ports stay open across stops, starts and
restores, and a fork gets the same ones. A --public URL (froog host) opens its
TCP port too. Only clients with IPv6 reach them. At most 64 per sandbox,
public URLs' ports included.`,
		Example: `  froog port open my-box 27015/udp
  froog port open my-box 5432            # TCP
  froog port close my-box 27015/udp
  froog port list my-box`,
	}
	change := func(use, short string, open bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " NAME PORT[/tcp|udp]",
			Short: short,
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				port, proto, err := portProto(args[1])
				if err != nil {
					return err
				}
				h, err := a.sandbox(args[0])
				if err != nil {
					return err
				}
				var ports *froog.OpenPorts
				if open {
					ports, err = h.OpenPort(cmd.Context(), port, proto)
				} else {
					ports, err = h.ClosePort(cmd.Context(), port, proto)
				}
				if err != nil {
					return err
				}
				return a.print(ports, func(w io.Writer) {
					fmt.Fprintf(w, "%d/%s %s\n", port, proto, map[bool]string{true: "open", false: "closed"}[open])
				})
			},
		}
	}
	list := &cobra.Command{
		Use:   "list NAME",
		Short: "The ports open on its IPv6 address, public URLs' included",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			ports, err := h.Ports(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(ports, func(w io.Writer) {
				var rows [][]string
				for _, p := range ports.Ports {
					var by []string
					if p.Open {
						by = append(by, "port open")
					}
					if p.PublicUrl {
						by = append(by, "public URL")
					}
					rows = append(rows, []string{fmt.Sprintf("%d/%s", p.Port, p.Protocol), strings.Join(by, ", ")})
				}
				table(w, []string{"PORT", "OPENED BY"}, rows)
				if ports.Ipv6 != nil {
					fmt.Fprintf(w, "on %s\n", *ports.Ipv6)
				}
			})
		},
	}
	c.AddCommand(change("open", "Open a port (TCP unless /udp)", true), change("close", "Close a port opened with port open", false), list)
	return c
}
