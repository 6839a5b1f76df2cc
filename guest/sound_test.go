package guest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// oggPage is one Ogg page holding segs (lacing values) of body.
func oggPage(continued bool, segs []byte, body []byte) []byte {
	h := make([]byte, 27, 27+len(segs)+len(body))
	copy(h, "OggS")
	if continued {
		h[5] = 1
	}
	h[26] = byte(len(segs))
	return append(append(h, segs...), body...)
}

func TestOggPackets(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{7}, 300) // 255 + 45: spans two pages
	var stream []byte
	stream = append(stream, oggPage(false, []byte{8}, []byte("OpusHead"))...)
	stream = append(stream, oggPage(false, []byte{3, 0, 255}, append([]byte("abc"), big[:255]...))...)
	stream = append(stream, oggPage(true, []byte{45, 2}, append(big[255:], "xy"...))...)
	var got []string
	err := OggPackets(bytes.NewReader(stream), func(p []byte) error { got = append(got, string(p)); return nil })
	want := []string{"OpusHead", "abc", "", string(big), "xy"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	for _, bad := range [][]byte{[]byte("OggX"), stream[:30], append(stream, "OggS\x01"...)} {
		if err := OggPackets(bytes.NewReader(bad), func([]byte) error { return nil }); err == nil {
			t.Errorf("OggPackets(%q…) = nil, want an error", bad[:4])
		}
	}
	stop := errors.New("stop")
	if err := OggPackets(bytes.NewReader(stream), func([]byte) error { return stop }); err != stop {
		t.Errorf("fn's error: got %v", err)
	}
}

func FuzzOggPackets(f *testing.F) {
	f.Add(oggPage(false, []byte{3}, []byte("abc")))
	f.Add(oggPage(true, []byte{255, 1}, bytes.Repeat([]byte{1}, 256)))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		OggPackets(bytes.NewReader(b), func(p []byte) error { n += len(p); return nil })
		if n > len(b) {
			t.Fatalf("%d bytes of packets from %d bytes", n, len(b))
		}
	})
}

func needSound(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"pulseaudio", "pacat", "ffmpeg"} {
		if !have(bin) {
			testdep.Missing(t, "%s is not installed (deploy/testdeps.sh installs pulseaudio, pulseaudio-utils and ffmpeg)", bin)
		}
	}
}

// encoders lists the sound encoders (ffmpeg) among the supervisor's
// processes.
func encoders(pgid int) []int {
	var e []int
	for _, pid := range GroupPids(pgid) {
		if commOf(pid) == "ffmpeg" {
			e = append(e, pid)
		}
	}
	return e
}

// A desktop's sound: its PulseAudio takes what is played (pacat) and its
// sound port streams it as Opus packets, 50 a second, an encoder running
// only while a connection is open.
func TestDesktopSound(t *testing.T) {
	t.Parallel()
	testdep.Short(t, "starts a real desktop with PulseAudio and ffmpeg: ~10 s")
	needXvnc(t)
	needSound(t)
	home := t.TempDir()
	t.Cleanup(func() { cli(t, home, "stop") })
	st := start(t, home)
	n, _ := strconv.Atoi(st.Display[1:])
	if st.AudioPort != SoundBase+n || st.PulseServer != PulseServer(n) {
		t.Fatalf("start printed %+v; want audio_port %d, pulse_server %s", st, SoundBase+n, PulseServer(n))
	}
	if e := encoders(st.PID); len(e) != 0 {
		t.Fatalf("encoders %v run before anyone listens", e)
	}

	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(st.AudioPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != SoundHeader {
		t.Fatalf("first line %q, %v; want %q", line, err, SoundHeader)
	}
	if e := encoders(st.PID); len(e) != 1 {
		t.Fatalf("encoders %v while one listens; want one", e)
	}
	packet := func() []byte {
		t.Helper()
		var h [2]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, binary.BigEndian.Uint16(h[:]))
		if _, err := io.ReadFull(r, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Silence first: once the encoder runs (its first packet), three
	// seconds of packets, 150 of them, in about three seconds: paced, not
	// a flood. A loaded machine's scheduling is allowed for: an encoder
	// that fell behind sends what it owes at once, a small part of three
	// seconds.
	quiet := len(packet())
	began := time.Now()
	for range 150 {
		quiet = max(quiet, len(packet()))
	}
	if d := time.Since(began); d < 1500*time.Millisecond || d > 15*time.Second {
		t.Errorf("150 packets (3 s of sound) in %v", d)
	}
	// A second of 440 Hz; its packets are larger than silence's.
	tone := make([]byte, soundRate*soundChannels*2)
	for i := range soundRate {
		v := int16(12000 * math.Sin(2*math.Pi*440*float64(i)/soundRate))
		binary.LittleEndian.PutUint16(tone[4*i:], uint16(v))
		binary.LittleEndian.PutUint16(tone[4*i+2:], uint16(v))
	}
	play := exec.Command("pacat", "--raw", "--format=s16le", "--rate=48000", "--channels=2", "--latency-msec=20")
	play.Env = append(os.Environ(), "PULSE_SERVER="+st.PulseServer)
	play.Stdin = bytes.NewReader(tone)
	if err := play.Start(); err != nil {
		t.Fatal(err)
	}
	played := make(chan error, 1)
	go func() { played <- play.Wait() }()
	// Packets until the tone's, or two seconds of them after pacat drained
	// it into PulseAudio: on a loaded machine pacat may take longer to
	// begin than a fixed count of packets lasts.
	c.SetDeadline(time.Now().Add(20 * time.Second))
	loud, after := 0, -1
	for (loud < 4*quiet || loud < 60) && after < 100 {
		loud = max(loud, len(packet()))
		if after >= 0 {
			after++
			continue
		}
		select {
		case err := <-played:
			if err != nil {
				t.Fatalf("pacat: %v", err)
			}
			after = 0
		default:
		}
	}
	if loud < 4*quiet || loud < 60 {
		t.Fatalf("the tone's largest packet is %d bytes, silence's %d: the tone did not reach the stream", loud, quiet)
	}
	c.Close()
	wait.For(t, 5*time.Second, "the encoder to end with its listener", func() bool { return len(encoders(st.PID)) == 0 })
}

// Two screens of one user with a session bus (as in a sandbox's SSH
// session, or two local sandboxes): each has its own PulseAudio, which
// does not claim the bus's PulseAudio name and so does not exit for the
// other's.
func TestDesktopSoundTwoScreensOneBus(t *testing.T) {
	t.Parallel()
	testdep.Short(t, "starts two real desktops with PulseAudio: ~10 s")
	needXvnc(t)
	needSound(t)
	testdep.Need(t, "dbus-daemon")
	testdep.Need(t, "pactl")
	bus := "unix:path=" + filepath.Join(t.TempDir(), "bus")
	d := exec.Command("dbus-daemon", "--session", "--nofork", "--address="+bus)
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Kill(); d.Wait() })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for range 2 {
		home := t.TempDir()
		env := cliEnv(home, "PATH="+os.Getenv("PATH"), "DBUS_SESSION_BUS_ADDRESS="+bus)
		stop := &exec.Cmd{Path: exe, Args: []string{Name, "stop"}, Dir: home, Env: env}
		t.Cleanup(func() { stop.Run() })
		out, err := (&exec.Cmd{Path: exe, Args: []string{Name, "start"}, Dir: home, Env: env}).Output()
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		st := parseState(t, string(out))
		if st.PulseServer == "" {
			t.Fatalf("start printed %+v: no sound", st)
		}
		servers = append(servers, st.PulseServer)
	}
	for _, srv := range servers {
		var out []byte
		if !wait.Until(5*time.Second, func() bool {
			c := exec.Command("pactl", "info")
			c.Env = append(os.Environ(), "PULSE_SERVER="+srv)
			out, err = c.CombinedOutput()
			return err == nil
		}) {
			t.Errorf("PulseAudio at %s does not answer: %v: %s", srv, err, out)
		}
	}
}
