package guest

// Sound: every screen has a PulseAudio server of its own with one null
// sink ("froog"), which is what programs on the screen play to (the
// supervisor hands them PULSE_SERVER); and a small server on
// 127.0.0.1:SoundBase+display that, for each connection, captures the
// sink's monitor and encodes it to Opus with ffmpeg — only while someone
// is connected: nothing is encoded while nobody listens. The edge makes
// one connection per screen whatever the number of listeners, and fans
// the packets out to them.
//
// The connection speaks, server to client only:
//
//	FROOG-SOUND 1 opus 48000 2\n       (one line: version, codec, rate, channels)
//	then per Opus packet (20 ms):      length u16 BE, the packet
//
// ffmpeg writes Ogg (one page a packet, flushed as written); this file
// takes the packets out of the pages and drops the OpusHead and OpusTags
// headers (channel mapping family 0: stereo, 48 kHz).
//
// Where pulseaudio or ffmpeg is missing the screen has no sound: start
// and status then say nothing of it (no audio_port).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SoundBase plus a display's number is its sound port (:10 is 6210).
const SoundBase = 6200

// SoundHeader is the first line of a sound connection.
const SoundHeader = "FROOG-SOUND 1 opus 48000 2\n"

// soundRate and soundChannels are the sink's and the stream's format.
const (
	soundRate     = 48000
	soundChannels = 2
)

// pulseDir is display n's PulseAudio runtime folder, its socket "native"
// in it: in the temporary folder, named by the display (which this
// supervisor's X server holds), for the same reason as the session
// bus's (busPath): a unix socket's path has at most 107 bytes.
func pulseDir(n int) string {
	return filepath.Join(xLockDir, fmt.Sprintf(".froog-desktop-pulse-%d", n))
}

// PulseServer is the PULSE_SERVER of display n's sound: what a program
// started outside the screen (an exec, a test) sets to play on it.
func PulseServer(n int) string { return "unix:" + filepath.Join(pulseDir(n), "native") }

// pulseArgs run PulseAudio for display n without its default
// configuration: a null sink at the stream's format, the native protocol
// on the runtime folder's socket (anonymous: the folder is 0700), no
// exit when idle.
func pulseArgs(n int) []string {
	return []string{"-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--log-target=stderr", "--log-level=error",
		"-L", fmt.Sprintf("module-null-sink sink_name=froog rate=%d channels=%d format=s16le sink_properties=device.description=froog", soundRate, soundChannels),
		"-L", "module-native-protocol-unix socket=" + filepath.Join(pulseDir(n), "native") + " auth-anonymous=1"}
}

// encoderArgs capture the sink's monitor of server and write Opus (64
// kbit/s, 20 ms packets) in Ogg to stdout, one page a packet, with the
// least buffering ffmpeg allows: a 10 ms capture fragment, no probing.
func encoderArgs(server string) []string {
	return []string{"-hide_banner", "-loglevel", "error", "-nostdin",
		"-fflags", "nobuffer", "-probesize", "32", "-analyzeduration", "0",
		"-f", "pulse", "-server", server, "-name", "froog-desktop", "-stream_name", "sound",
		"-fragment_size", strconv.Itoa(soundRate / 100 * soundChannels * 2),
		"-sample_rate", strconv.Itoa(soundRate), "-channels", strconv.Itoa(soundChannels), "-i", "froog.monitor",
		"-c:a", "libopus", "-b:a", "64k", "-frame_duration", "20", "-application", "audio",
		"-f", "ogg", "-page_duration", "20000", "-flush_packets", "1", "-"}
}

// sound starts display n's PulseAudio and sound server where both
// programs are installed, and adds PULSE_SERVER to the environment of
// what the screen runs next. It returns the sound port, 0 for none.
func (s *supervisor) sound(ctx context.Context, n int) int {
	if !have("pulseaudio") || !have("ffmpeg") {
		s.log.Info("no sound: pulseaudio or ffmpeg is not installed")
		return 0
	}
	dir := pulseDir(n)
	if err := ownDir(dir); err != nil {
		s.log.Warn("no sound", "err", err)
		return 0
	}
	os.Remove(filepath.Join(dir, "native"))
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(SoundBase+n)))
	if err != nil {
		s.log.Warn("no sound: its port is taken", "port", SoundBase+n, "err", err)
		return 0
	}
	// No session bus for it: a PulseAudio that reaches one claims the
	// name org.PulseAudio1 there and exits when it is taken — by the
	// user's own PulseAudio, or another screen's (the browser view's, a
	// second sandbox's with the local driver).
	env := append(withoutVar(withoutVar(withoutVar(s.env, "PULSE_RUNTIME_PATH"), "PULSE_STATE_PATH"), "DBUS_SESSION_BUS_ADDRESS"),
		"PULSE_RUNTIME_PATH="+dir, "PULSE_STATE_PATH="+filepath.Join(s.o.StateDir, string(s.o.Kind)+".pulse"),
		"DBUS_SESSION_BUS_ADDRESS=disabled:")
	s.keepEnv(ctx, env, "pulseaudio", pulseArgs(n)...)
	if !waitUntil(5*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "native")); return err == nil }) {
		s.log.Warn("pulseaudio did not make its socket within 5 s; sound may come later", "dir", dir)
	}
	s.env = append(withoutVar(s.env, "PULSE_SERVER"), "PULSE_SERVER="+PulseServer(n))
	srv := &soundServer{server: PulseServer(n), env: s.env, log: s.log}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); <-ctx.Done(); ln.Close() }()
	go func() { defer s.wg.Done(); srv.serve(ctx, ln) }()
	s.log.Info("sound ready", "port", SoundBase+n, "pulse_server", PulseServer(n))
	return SoundBase + n
}

// ownDir makes dir a 0700 folder of this user's, or says why it cannot.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("sound folder: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("sound folder: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("sound folder %s is not a folder of this user's", dir)
	}
	return os.Chmod(dir, 0o700)
}

// soundServer encodes the sink's sound for each connection.
type soundServer struct {
	server string   // PULSE_SERVER
	env    []string // the encoder's
	log    *slog.Logger
}

func (s *soundServer) serve(ctx context.Context, ln net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.stream(ctx, c) }()
	}
}

// stream runs an encoder for connection c and writes its packets to c
// until c or ctx ends.
func (s *soundServer) stream(ctx context.Context, c net.Conn) {
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { io.Copy(io.Discard, c); cancel() }() // the client says nothing: its end is the end
	cmd := exec.CommandContext(ctx, "ffmpeg", encoderArgs(s.server)...)
	cmd.Env, cmd.Stderr = s.env, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.log.Warn("sound encoder", "err", err)
		return
	}
	if err := cmd.Start(); err != nil {
		s.log.Warn("sound encoder", "err", err)
		return
	}
	began := time.Now()
	w := bufio.NewWriterSize(c, 4096)
	w.WriteString(SoundHeader)
	if err := w.Flush(); err != nil { // at once: the client tells a failing encoder from no sound server
		cancel()
		cmd.Wait()
		return
	}
	packets := 0
	err = OggPackets(bufio.NewReaderSize(out, 8192), func(p []byte) error {
		if packets++; packets <= 2 { // OpusHead, OpusTags
			return nil
		}
		if len(p) > 0xffff {
			return fmt.Errorf("an Opus packet of %d bytes", len(p))
		}
		var h [2]byte
		binary.BigEndian.PutUint16(h[:], uint16(len(p)))
		w.Write(h[:])
		w.Write(p)
		return w.Flush()
	})
	cancel()
	werr := cmd.Wait()
	s.log.Info("sound listener left", "packets", max(packets-2, 0), "duration", time.Since(began).Round(time.Millisecond).String(),
		"err", fmt.Sprint(err), "encoder", fmt.Sprint(werr))
}

// OggPackets reads an Ogg stream of one logical stream and calls fn with
// each packet, in order (valid until fn returns); a packet may span
// pages. It returns fn's error, or the stream's at its end (nil at a
// clean end).
func OggPackets(r io.Reader, fn func([]byte) error) error {
	var (
		head    [27]byte
		lacing  [255]byte
		body    []byte
		partial []byte
	)
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("ogg page header: %w", err)
		}
		if string(head[:4]) != "OggS" || head[4] != 0 {
			return errors.New("ogg: not a page")
		}
		segs := lacing[:head[26]]
		if _, err := io.ReadFull(r, segs); err != nil {
			return fmt.Errorf("ogg lacing: %w", err)
		}
		size := 0
		for _, l := range segs {
			size += int(l)
		}
		if cap(body) < size {
			body = make([]byte, size)
		}
		body = body[:size]
		if _, err := io.ReadFull(r, body); err != nil {
			return fmt.Errorf("ogg page body: %w", err)
		}
		if head[5]&1 == 0 { // not a continued packet: whatever was pending is lost
			partial = partial[:0]
		}
		off := 0
		for _, l := range segs {
			partial = append(partial, body[off:off+int(l)]...)
			off += int(l)
			if l < 255 {
				if err := fn(partial); err != nil {
					return err
				}
				partial = partial[:0]
			}
		}
	}
}
