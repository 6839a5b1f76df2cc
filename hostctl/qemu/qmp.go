package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// monitor is one QMP connection to a VM. go-qemu's socket monitor has two
// traps: an event stream nobody reads stalls every later command, and a
// reply over 64 KiB breaks the connection. So one goroutine always drains
// the events, every command has a deadline (past it the connection is
// dropped), and nothing asks for large replies (no query-qmp-schema).
type monitor struct {
	mon    *qmp.SocketMonitor
	events chan string // event names, for whoever waits on them; never blocks the drain
}

func dialMonitor(socket string, timeout time.Duration) (*monitor, error) {
	mon, err := qmp.NewSocketMonitor("unix", socket, timeout)
	if err != nil {
		return nil, err
	}
	// QMP serves one client at a time: a second one gets no greeting, and
	// Connect would wait for it forever.
	connected := make(chan error, 1)
	go func() { connected <- mon.Connect() }()
	select {
	case err = <-connected:
	case <-time.After(timeout):
		err = errors.New("no greeting from the monitor (is another client connected?)")
	}
	if err != nil {
		mon.Disconnect()
		return nil, err
	}
	events, err := mon.Events(context.Background())
	if err != nil {
		mon.Disconnect()
		return nil, err
	}
	m := &monitor{mon: mon, events: make(chan string, 16)}
	go func() {
		for e := range events {
			select {
			case m.events <- e.Event:
			default: // nobody is waiting: drop it, never stall
			}
		}
		close(m.events)
	}()
	return m, nil
}

// run executes one command (with arguments, or nil) and decodes its
// "return" into out (may be nil).
func (m *monitor) run(ctx context.Context, command string, args any, out any) error {
	cmd := map[string]any{"execute": command}
	if args != nil {
		cmd["arguments"] = args
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	type result struct {
		raw []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		raw, err := m.mon.Run(b)
		done <- result{raw, err}
	}()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	select {
	case r := <-done:
		if r.err != nil {
			return fmt.Errorf("qmp %s: %w", command, r.err)
		}
		if r.raw == nil {
			return fmt.Errorf("qmp %s: the monitor closed", command)
		}
		if out == nil {
			return nil
		}
		var reply struct {
			Return json.RawMessage `json:"return"`
		}
		if err := json.Unmarshal(r.raw, &reply); err != nil {
			return fmt.Errorf("qmp %s: %w", command, err)
		}
		return json.Unmarshal(reply.Return, out)
	case <-ctx.Done():
		m.close() // the pending Run returns once the socket is gone
		return fmt.Errorf("qmp %s: %w", command, ctx.Err())
	}
}

// status is the VM's run state: "running", "paused", "shutdown", …
func (m *monitor) status(ctx context.Context) (string, error) {
	var st struct {
		Status string `json:"status"`
	}
	if err := m.run(ctx, "query-status", nil, &st); err != nil {
		return "", err
	}
	if st.Status == "" {
		return "", errors.New("qmp query-status: no status")
	}
	return st.Status, nil
}

func (m *monitor) close() { m.mon.Disconnect() }
