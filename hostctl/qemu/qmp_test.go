package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQMPServer speaks QMP on a unix socket as QEMU does, with events
// where QEMU may send them: a fake, because the point is the order of
// lines on the wire, which a real QEMU gives only by chance. serve gets
// each command's name and arguments and writes what it likes.
func fakeQMPServer(t *testing.T, greet bool, serve func(w *bufio.Writer, command string, args json.RawMessage)) string {
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
// between (also right before the capabilities' reply), through go-qemu's
// typed API and through Run; errors carry QEMU's class and text, a reply
// of any length arrives whole, and each reply stays intact while the next
// lines arrive (run with -race).
func TestQMPClient(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200<<10)
	sock := fakeQMPServer(t, true, func(w *bufio.Writer, command string, args json.RawMessage) {
		switch command {
		case "qmp_capabilities":
			w.WriteString(event + `{"return": {}}` + "\r\n")
		case "query-status":
			w.WriteString(event + `{"return": {"status": "running", "running": true}}` + "\r\n" + event + event)
		case "query-kvm":
			w.WriteString(`{"return": {"enabled": false, "present": true}}` + "\r\n" + event)
		case "echo":
			w.WriteString(`{"return": ` + string(args) + "}\r\n" + event)
		case "big":
			w.WriteString(`{"return": {"s": "` + big + `"}}` + "\r\n")
		case "stop":
			w.WriteString(`{"return": {}}` + "\r\n" + event)
		default:
			w.WriteString(`{"error": {"class": "CommandNotFound", "desc": "The command ` + command + ` has not been found"}}` + "\r\n")
		}
	})
	m, err := dialMonitor(sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Disconnect()
	ctx := context.Background()
	for i := range 50 {
		if st, err := m.status(ctx); err != nil || st != "running" {
			t.Fatalf("status %d: %q, %v", i, st, err)
		}
		var out struct{ N int }
		if err := m.run(ctx, "echo", map[string]int{"n": i}, &out); err != nil || out.N != i {
			t.Fatalf("echo %d: %+v, %v", i, out, err)
		}
		if kvm, err := m.api(ctx).QueryKVM(); err != nil || kvm.Enabled || !kvm.Present {
			t.Fatalf("query-kvm %d: %+v, %v", i, kvm, err)
		}
	}
	if err := m.api(ctx).Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// go-qemu's untyped path: Run takes and gives whole JSON lines.
	reply, err := m.Run([]byte(`{"execute": "echo", "arguments": {"n": 7}}`))
	if err != nil || !strings.Contains(string(reply), `"return": {"n": 7}`) {
		t.Fatalf("Run: %s, %v", reply, err)
	}
	if _, err := m.Run([]byte(`{"arguments": {}}`)); err == nil || !strings.Contains(err.Error(), "not a command") {
		t.Fatalf("Run without execute: %v", err)
	}
	var out struct{ S string }
	if err := m.run(ctx, "big", nil, &out); err != nil || out.S != big {
		t.Fatalf("a 200 KiB reply: %d bytes, %v", len(out.S), err)
	}
	err = m.run(ctx, "nope", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "CommandNotFound") || !strings.Contains(err.Error(), "nope has not been found") {
		t.Fatalf("an error reply: %v", err)
	}
	// The same through go-qemu's API: cont is not served by this fake.
	if err := m.api(ctx).Cont(); err == nil || !strings.Contains(err.Error(), "qmp cont: CommandNotFound") {
		t.Fatalf("an error reply through go-qemu: %v", err)
	}
	if st, err := m.status(ctx); err != nil || st != "running" {
		t.Fatalf("after an error: %q, %v", st, err)
	}
}

// TestQMPEvents: Events streams go-qemu events, each in memory of its
// own, in order, with the replies of commands between them; a stream
// nobody reads yet neither stalls a command nor loses an event; a stream
// closes when its context ends, and every stream when the connection
// does.
func TestQMPEvents(t *testing.T) {
	t.Parallel()
	const n = 300
	sock := fakeQMPServer(t, true, func(w *bufio.Writer, command string, _ json.RawMessage) {
		switch command {
		case "qmp_capabilities":
			w.WriteString(`{"return": {}}` + "\r\n")
		case "burst":
			for i := range n {
				fmt.Fprintf(w, `{"timestamp": {"seconds": %d, "microseconds": 5}, "event": "JOB_STATUS_CHANGE", "data": {"id": "j%d", "status": "running"}}`+"\r\n", i, i)
			}
			w.WriteString(`{"return": {}}` + "\r\n")
		}
	})
	m, err := dialMonitor(sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Disconnect()
	ctx := context.Background()
	events, err := m.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	other, err := m.Events(cctx)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads yet: the commands still get their replies.
	for range 3 {
		if err := m.run(ctx, "burst", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 3 * n {
		ev := <-events
		if want := fmt.Sprintf("j%d", k%n); ev.Event != "JOB_STATUS_CHANGE" || ev.Data["id"] != want || ev.Timestamp.Seconds != int64(k%n) || ev.Timestamp.Microseconds != 5 {
			t.Fatalf("event %d: %+v, want id %s", k, ev, want)
		}
	}
	cancel()
	for range other { // what it queued, then closed
	}
	m.Disconnect()
	if ev, ok := <-events; ok {
		t.Fatalf("an event after the connection ended: %+v", ev)
	}
	if _, err := m.Events(ctx); err == nil {
		t.Fatal("Events on a closed monitor")
	}
}

// TestQMPDeadlines: a monitor that never greets (QMP serves one client at
// a time) fails the dial within its timeout; a command that gets no reply
// fails at its deadline (the context's, through go-qemu's API too) and
// drops the connection, so a late reply can never answer another command.
func TestQMPDeadlines(t *testing.T) {
	t.Parallel()
	if _, err := dialMonitor(fakeQMPServer(t, false, nil), 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no greeting") {
		t.Fatalf("a monitor that never greets: %v", err)
	}
	sock := fakeQMPServer(t, true, func(w *bufio.Writer, command string, _ json.RawMessage) {
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
	if _, err := m.api(ctx).QueryStatus(); err == nil || !strings.Contains(err.Error(), "qmp query-status: context deadline exceeded") {
		t.Fatalf("no reply: %v", err)
	}
	if err := m.run(context.Background(), "query-status", nil, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a command after a dropped connection: %v", err)
	}
	if _, err := m.Run([]byte(`{"execute": "stop"}`)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Run after a dropped connection: %v", err)
	}
	if err := m.Connect(); err == nil {
		t.Fatal("a monitor connected twice")
	}
}
