package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// monitor is one QMP connection to a VM: JSON messages, one a line.
// Replies answer commands in order; events (lines with "event") come in
// between at any time and are dropped, so nobody has to read them and
// none can stall a command. Every reply is a line of its own, read into
// memory of its own (go-qemu's monitor, used before, handed out its
// scanner's buffer, which the next line overwrote: a data race whenever
// an event followed a reply, as during a backup job), of any length. One
// command runs at a time, each with a deadline: past it the connection is
// dropped.
type monitor struct {
	conn    net.Conn
	replies chan []byte // closed when the connection ends
	closed  chan struct{}
	once    sync.Once
	mu      sync.Mutex // one command at a time
}

func dialMonitor(socket string, timeout time.Duration) (*monitor, error) {
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, err
	}
	m := &monitor{conn: conn, replies: make(chan []byte), closed: make(chan struct{})}
	// QMP serves one client at a time: a second one gets no greeting, and
	// would wait for it forever without the deadline.
	conn.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(conn)
	line, err := r.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("no greeting from the monitor (is another client connected?): %w", err)
	}
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if json.Unmarshal(line, &greeting) != nil || greeting.QMP == nil {
		conn.Close()
		return nil, fmt.Errorf("qmp: not a greeting: %.200q", line)
	}
	if _, err := conn.Write([]byte(`{"execute":"qmp_capabilities"}` + "\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp_capabilities: %w", err)
	}
	for {
		line, err = r.ReadBytes('\n')
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("qmp_capabilities: %w", err)
		}
		if isEvent(line) {
			continue
		}
		if err := replyError("qmp_capabilities", line); err != nil {
			conn.Close()
			return nil, err
		}
		break
	}
	conn.SetDeadline(time.Time{})
	go m.read(r)
	return m, nil
}

// read hands each reply to the command waiting for it, and drops events,
// until the connection ends.
func (m *monitor) read(r *bufio.Reader) {
	defer close(m.replies)
	for {
		line, err := r.ReadBytes('\n') // a new slice each time
		if err != nil {
			return
		}
		if isEvent(line) || len(line) < 2 {
			continue
		}
		select {
		case m.replies <- line:
		case <-m.closed:
			return
		}
	}
}

func isEvent(line []byte) bool {
	var msg struct {
		Event string `json:"event"`
	}
	return json.Unmarshal(line, &msg) == nil && msg.Event != ""
}

// replyError is the QMP error a reply carries, or nil.
func replyError(command string, line []byte) error {
	var reply struct {
		Error *struct {
			Class string `json:"class"`
			Desc  string `json:"desc"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	if reply.Error != nil {
		return fmt.Errorf("qmp %s: %s: %s", command, reply.Error.Class, reply.Error.Desc)
	}
	return nil
}

// run executes one command (with arguments, or nil) and decodes its
// "return" into out (may be nil). Without a deadline in ctx it has 10
// seconds.
func (m *monitor) run(ctx context.Context, command string, args any, out any) error {
	cmd := map[string]any{"execute": command}
	if args != nil {
		cmd["arguments"] = args
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	deadline, _ := ctx.Deadline()
	m.conn.SetWriteDeadline(deadline)
	if _, err := m.conn.Write(append(b, '\n')); err != nil {
		m.close()
		return fmt.Errorf("qmp %s: the monitor closed: %w", command, err)
	}
	select {
	case line, ok := <-m.replies:
		if !ok {
			return fmt.Errorf("qmp %s: the monitor closed", command)
		}
		if err := replyError(command, line); err != nil {
			return err
		}
		if out == nil {
			return nil
		}
		var reply struct {
			Return json.RawMessage `json:"return"`
		}
		if err := json.Unmarshal(line, &reply); err != nil {
			return fmt.Errorf("qmp %s: %w", command, err)
		}
		return json.Unmarshal(reply.Return, out)
	case <-ctx.Done():
		m.close() // a late reply must not answer the next command
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

func (m *monitor) close() {
	m.once.Do(func() {
		close(m.closed)
		m.conn.Close()
	})
}
