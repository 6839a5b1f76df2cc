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

	"github.com/digitalocean/go-qemu/qmp"
	"github.com/digitalocean/go-qemu/qmp/raw"
)

// monitor is one QMP connection to a VM, a go-qemu qmp.Monitor: the
// driver issues its commands through go-qemu's generated API
// (raw.Monitor, see api) over it. JSON messages, one a line. Replies
// answer commands in order; events (lines with "event") come in between
// at any time and go to whoever listens (Events), else are dropped, so
// nobody has to read them and none can stall a command. Every reply is a
// line of its own, read into memory of its own, of any length. One
// command runs at a time, each with a deadline: past it the connection is
// dropped.
//
// Why not go-qemu's own qmp.SocketMonitor: its listen sends
// bufio.Scanner.Bytes() on a channel, memory the next Scan overwrites — a
// data race whenever an event follows a reply, as during a backup job,
// which -race caught (go-qemu issue #226); an event arriving before the
// qmp_capabilities reply is taken for that reply and the real one then
// answers the next command (go-qemu PR #210, not merged); and its Run has
// no deadline, so a QEMU that does not answer hangs its caller.
type monitor struct {
	socket  string
	timeout time.Duration // for Connect, and for commands without a deadline of their own

	conn    net.Conn
	replies chan []byte // closed when the connection ends
	closed  chan struct{}
	once    sync.Once
	mu      sync.Mutex // one command at a time

	evmu      sync.Mutex
	listeners map[*listener]struct{} // nil once the connection ended
}

var _ qmp.Monitor = (*monitor)(nil)

// newMonitor is a monitor for the QMP socket, not connected yet: Connect
// connects it.
func newMonitor(socket string, timeout time.Duration) *monitor {
	return &monitor{socket: socket, timeout: timeout, replies: make(chan []byte), closed: make(chan struct{}),
		listeners: map[*listener]struct{}{}}
}

// dialMonitor is a connected monitor.
func dialMonitor(socket string, timeout time.Duration) (*monitor, error) {
	m := newMonitor(socket, timeout)
	if err := m.Connect(); err != nil {
		return nil, err
	}
	return m, nil
}

// Connect connects to the socket, reads QEMU's greeting and negotiates
// the capabilities, all within the monitor's timeout. A monitor connects
// once.
func (m *monitor) Connect() error {
	if m.conn != nil {
		return errors.New("qmp: the monitor is connected already")
	}
	select {
	case <-m.closed:
		return errors.New("qmp: the monitor was disconnected")
	default:
	}
	conn, err := net.DialTimeout("unix", m.socket, m.timeout)
	if err != nil {
		return err
	}
	// QMP serves one client at a time: a second one gets no greeting, and
	// would wait for it forever without the deadline.
	conn.SetDeadline(time.Now().Add(m.timeout))
	r := bufio.NewReader(conn)
	line, err := r.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return fmt.Errorf("no greeting from the monitor (is another client connected?): %w", err)
	}
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if json.Unmarshal(line, &greeting) != nil || greeting.QMP == nil {
		conn.Close()
		return fmt.Errorf("qmp: not a greeting: %.200q", line)
	}
	if _, err := conn.Write([]byte(`{"execute":"qmp_capabilities"}` + "\n")); err != nil {
		conn.Close()
		return fmt.Errorf("qmp_capabilities: %w", err)
	}
	for {
		line, err = r.ReadBytes('\n')
		if err != nil {
			conn.Close()
			return fmt.Errorf("qmp_capabilities: %w", err)
		}
		if _, ok := parseEvent(line); ok { // not the reply (go-qemu PR #210)
			continue
		}
		if err := replyError("qmp_capabilities", line); err != nil {
			conn.Close()
			return err
		}
		break
	}
	conn.SetDeadline(time.Time{})
	m.conn = conn
	go m.read(r)
	return nil
}

// Disconnect closes the connection: a command waiting for its reply
// fails, and every Events channel closes.
func (m *monitor) Disconnect() error {
	m.close()
	return nil
}

func (m *monitor) close() {
	m.once.Do(func() {
		close(m.closed)
		if m.conn != nil {
			m.conn.Close()
		}
	})
}

// read hands each reply to the command waiting for it, and each event to
// the listeners, until the connection ends.
func (m *monitor) read(r *bufio.Reader) {
	defer func() {
		close(m.replies)
		m.evmu.Lock()
		for l := range m.listeners {
			l.end()
		}
		m.listeners = nil
		m.evmu.Unlock()
	}()
	for {
		line, err := r.ReadBytes('\n') // a new slice each time
		if err != nil {
			return
		}
		if ev, ok := parseEvent(line); ok {
			m.evmu.Lock()
			for l := range m.listeners {
				l.push(ev)
			}
			m.evmu.Unlock()
			continue
		}
		if len(line) < 2 {
			continue
		}
		select {
		case m.replies <- line:
		case <-m.closed:
			return
		}
	}
}

// parseEvent decodes an event line into memory of its own.
func parseEvent(line []byte) (qmp.Event, bool) {
	var ev qmp.Event
	return ev, json.Unmarshal(line, &ev) == nil && ev.Event != ""
}

// Events streams the monitor's events from now on until ctx ends or the
// connection does; then the channel closes. Events wait in memory for a
// slow reader rather than stall the commands' replies behind them.
func (m *monitor) Events(ctx context.Context) (<-chan qmp.Event, error) {
	l := &listener{wake: make(chan struct{}, 1), done: make(chan struct{})}
	m.evmu.Lock()
	if m.listeners == nil || m.conn == nil {
		m.evmu.Unlock()
		return nil, errors.New("qmp: the monitor is not connected")
	}
	m.listeners[l] = struct{}{}
	m.evmu.Unlock()
	out := make(chan qmp.Event)
	go func() {
		defer close(out)
		defer func() {
			m.evmu.Lock()
			delete(m.listeners, l)
			m.evmu.Unlock()
		}()
		for {
			ev, ok, ended := l.pop()
			if ok {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
				continue
			}
			if ended {
				return
			}
			select {
			case <-l.wake:
			case <-l.done:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// listener is one Events call's queue: the reader pushes without ever
// waiting, the Events goroutine pops.
type listener struct {
	mu    sync.Mutex
	queue []qmp.Event
	ended bool
	wake  chan struct{} // one token: the queue grew
	done  chan struct{} // closed by end
}

func (l *listener) push(ev qmp.Event) {
	l.mu.Lock()
	l.queue = append(l.queue, ev)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// end: the connection ended; what is queued is still delivered.
func (l *listener) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended = true
		close(l.done)
	}
}

func (l *listener) pop() (ev qmp.Event, ok, ended bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) > 0 {
		ev = l.queue[0]
		l.queue[0] = qmp.Event{}
		l.queue = l.queue[1:]
		return ev, true, false
	}
	return ev, false, l.ended
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

// Run sends one command (a JSON object with "execute") and returns its
// reply, the whole line: an error reply is an error carrying QEMU's class
// and text. It has the monitor's timeout, at least 10 seconds; api binds
// commands to a context's deadline instead.
func (m *monitor) Run(command []byte) ([]byte, error) {
	return m.runJSON(context.Background(), command)
}

func (m *monitor) runJSON(ctx context.Context, command []byte) ([]byte, error) {
	var cmd struct {
		Execute string `json:"execute"`
	}
	if err := json.Unmarshal(command, &cmd); err != nil || cmd.Execute == "" {
		return nil, fmt.Errorf("qmp: not a command: %.200q", command)
	}
	name := cmd.Execute
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(m.timeout, 10*time.Second))
		defer cancel()
	}
	if m.conn == nil {
		return nil, fmt.Errorf("qmp %s: the monitor is not connected", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.closed:
		return nil, fmt.Errorf("qmp %s: the monitor closed", name)
	default:
	}
	deadline, _ := ctx.Deadline()
	m.conn.SetWriteDeadline(deadline)
	if _, err := m.conn.Write(append(command, '\n')); err != nil {
		m.close()
		return nil, fmt.Errorf("qmp %s: the monitor closed: %w", name, err)
	}
	select {
	case line, ok := <-m.replies:
		if !ok {
			return nil, fmt.Errorf("qmp %s: the monitor closed", name)
		}
		if err := replyError(name, line); err != nil {
			return nil, err
		}
		return line, nil
	case <-ctx.Done():
		m.close() // a late reply must not answer the next command
		return nil, fmt.Errorf("qmp %s: %w", name, ctx.Err())
	}
}

// api is go-qemu's typed QMP API over the monitor, each command with
// ctx's deadline (10 seconds without one).
func (m *monitor) api(ctx context.Context) *raw.Monitor {
	return raw.NewMonitor(boundMonitor{m, ctx})
}

// boundMonitor is the monitor with its commands bound to a context.
type boundMonitor struct {
	*monitor
	ctx context.Context
}

var _ qmp.Monitor = boundMonitor{}

func (b boundMonitor) Run(command []byte) ([]byte, error) { return b.runJSON(b.ctx, command) }

// run executes one command go-qemu's generated API lacks or gets wrong
// (with arguments, or nil) and decodes its "return" into out (may be
// nil). Without a deadline in ctx it has 10 seconds.
func (m *monitor) run(ctx context.Context, command string, args any, out any) error {
	b, err := json.Marshal(qmp.Command{Execute: command, Args: args})
	if err != nil {
		return err
	}
	line, err := m.runJSON(ctx, b)
	if err != nil || out == nil {
		return err
	}
	var reply struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	return json.Unmarshal(reply.Return, out)
}

// status is the VM's run state: "running", "paused", "shutdown", …
func (m *monitor) status(ctx context.Context) (string, error) {
	st, err := m.api(ctx).QueryStatus()
	if err != nil {
		return "", err
	}
	return st.Status.String(), nil
}
