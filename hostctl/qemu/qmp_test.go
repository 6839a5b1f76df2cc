package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// qmpServerFake speaks QMP on a unix socket as QEMU does, with events
// where QEMU may send them: a fake, because the point is the order of
// lines on the wire, which a real QEMU gives only by chance. serve gets
// each command's name and arguments and writes what it likes.
func qmpServerFake(t *testing.T, greet bool, serve func(w *bufio.Writer, command string, args json.RawMessage)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				w, r := bufio.NewWriter(c), bufio.NewReader(c)
				if !greet {
					r.ReadBytes('\n') // as QEMU with another client: silence
					return
				}
				w.WriteString(`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 8}}, "capabilities": ["oob"]}}` + "\r\n")
				w.Flush()
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					var cmd struct {
						Execute   string          `json:"execute"`
						Arguments json.RawMessage `json:"arguments"`
					}
					if err := json.Unmarshal(line, &cmd); err != nil {
						t.Errorf("not JSON: %q", line)
						return
					}
					serve(w, cmd.Execute, cmd.Arguments)
					w.Flush()
				}
			}()
		}
	}()
	return sock
}

const event = `{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "JOB_STATUS_CHANGE", "data": {"id": "j", "status": "running"}}` + "\r\n"

// TestQMPClient: replies reach their commands in order with events in
// between (also right before the capabilities' reply), errors carry
// QEMU's class and text, a reply of any length arrives whole, and each
// reply stays intact while the next lines arrive (run with -race).
func TestQMPClient(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	sock := qmpServerFake(t, true, func(w *bufio.Writer, command string, args json.RawMessage) {
		switch command {
		case "qmp_capabilities":
			w.WriteString(event + `{"return": {}}` + "\r\n")
		case "query-status":
			w.WriteString(event + `{"return": {"status": "running", "running": true}}` + "\r\n" + event + event)
		case "echo":
			w.WriteString(`{"return": ` + string(args) + "}\r\n" + event)
		case "big":
			w.WriteString(`{"return": {"s": "` + big + `"}}` + "\r\n")
		default:
			w.WriteString(`{"error": {"class": "CommandNotFound", "desc": "The command ` + command + ` has not been found"}}` + "\r\n")
		}
	})
	m, err := dialMonitor(sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	ctx := context.Background()
	for i := range 50 {
		if st, err := m.status(ctx); err != nil || st != "running" {
			t.Fatalf("status %d: %q, %v", i, st, err)
		}
		var out struct{ N int }
		if err := m.run(ctx, "echo", map[string]int{"n": i}, &out); err != nil || out.N != i {
			t.Fatalf("echo %d: %+v, %v", i, out, err)
		}
	}
	var out struct{ S string }
	if err := m.run(ctx, "big", nil, &out); err != nil || out.S != big {
		t.Fatalf("a 200 KiB reply: %d bytes, %v", len(out.S), err)
	}
	err = m.run(ctx, "nope", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "CommandNotFound") || !strings.Contains(err.Error(), "nope has not been found") {
		t.Fatalf("an error reply: %v", err)
	}
	if st, err := m.status(ctx); err != nil || st != "running" {
		t.Fatalf("after an error: %q, %v", st, err)
	}
}

// TestQMPDeadlines: a monitor that never greets (QMP serves one client at
// a time) fails the dial within its timeout; a command that gets no reply
// fails at its deadline and drops the connection, so a late reply can
// never answer another command.
func TestQMPDeadlines(t *testing.T) {
	if _, err := dialMonitor(qmpServerFake(t, false, nil), 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no greeting") {
		t.Fatalf("a monitor that never greets: %v", err)
	}
	sock := qmpServerFake(t, true, func(w *bufio.Writer, command string, _ json.RawMessage) {
		if command == "qmp_capabilities" {
			w.WriteString(`{"return": {}}` + "\r\n")
		}
		// anything else: no reply
	})
	m, err := dialMonitor(sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := m.run(ctx, "query-status", nil, nil); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("no reply: %v", err)
	}
	if err := m.run(context.Background(), "query-status", nil, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a command after a dropped connection: %v", err)
	}
}
