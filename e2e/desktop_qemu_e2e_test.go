package e2e_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testimage"
	"froog.tech/froog/internal/wait"
)

// The desktop on the OS image, through the real binary with the qemu
// driver (TCG): the first open of a desktop link starts XFCE in the VM
// (froog-desktop over the tunnel) and a frame of it arrives through the
// edge; the account's wall shows the sandbox's tile, a picture of its
// XFCE desktop (its panel on its background, not a black screen).
func TestQEMUDesktopOSImage(t *testing.T) {
	t.Parallel() // in the VM phase, beside the other VM tests only
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		testdep.Missing(t, "qemu-system-x86_64 is not installed (deploy/testdeps.sh installs it)")
	}
	img := testimage.Dir(t, "debian-13")
	tiny := tinyGuest(t)
	data := t.TempDir()
	// VMs outlive froogd by design; whatever the test leaves, it ends.
	t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
	_, m := start(t, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--domain", "froog.test",
		"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
		"--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", filepath.Join(tiny, "initramfs.gz"), "--images", "debian-13="+img,
		"--vm-cpus", "2", "--vm-memory-mb", "1024", "--vm-disk-gb", "4") // two vCPUs, two cores' work (ostest says why)
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	e := &deskEnv{c: client{t: t, base: m[1], key: strings.TrimSpace(string(key))}, edge: m[2], pool: x509.NewCertPool()}
	caPEM, _ := os.ReadFile(filepath.Join(data, "ca.pem"))
	e.pool.AppendCertsFromPEM(caPEM)
	e.web = edgeClientWith(e.edge, e.pool, false)

	began := time.Now()
	e.c.call("POST", "/v1/sandboxes", `{"name": "xfce", "os": "debian-13"}`, 202, nil)
	var sb struct{ ID, State, Error string }
	// The driver tells slow from broken: a boot that stops moving puts
	// the sandbox in error, naming the stage. The test's own bound is only
	// a backstop, past the 15 minutes the driver gives a TCG boot: beside
	// the OS image's suite in the other lane, a boot took over 6.
	if !wait.Until(16*time.Minute, func() bool {
		e.c.call("GET", "/v1/sandboxes/xfce", "", 200, &sb)
		return sb.State == "running" || sb.State == "error"
	}) || sb.State != "running" {
		t.Fatalf("the OS image's sandbox never ran: %+v", sb)
	}
	t.Logf("the OS image's sandbox ran after %v", time.Since(began).Round(time.Second))
	// Running is its SSH server's greeting; a login to a guest that has
	// just booted, under TCG beside the other lane's, can take longer than
	// the tunnel's 10 s handshake, and the API then answers 502 "try
	// again" (it did, on a slower machine): the test does.
	var last apiAnswer
	if !wait.Until(2*time.Minute, func() bool {
		last = e.c.ask(e.c.key, "POST", "/v1/sandboxes/xfce/exec", `{"command": "true"}`)
		return last.status != http.StatusBadGateway
	}) || last.status != 200 {
		t.Fatalf("exec in the booted sandbox: %d %s", last.status, last.body)
	}

	// The first open starts the desktop.
	if out := e.sh(t, "xfce", "froog-desktop status || true"); !strings.Contains(out, `"running":false`) {
		t.Fatalf("the desktop runs before anyone opened it: %s", out)
	}
	u, _ := url.Parse(e.link(t, "xfce", "desktop", ""))
	st, cookie := e.session(t, u.Host, u.Fragment)
	if st != 200 {
		t.Fatalf("the link's exchange: %d", st)
	}
	opened := time.Now()
	rc := e.rfb(t, u.Host, cookie)
	if rc.W != 1920 || rc.H != 1080 {
		t.Errorf("the desktop is %dx%d, want 1920x1080", rc.W, rc.H)
	}
	if err := rc.Request(0, 0, rc.W, rc.H, false); err != nil {
		t.Fatal(err)
	}
	upd, err := rc.ReadUpdate(nil)
	if err != nil {
		t.Fatalf("the first frame: %v", err)
	}
	t.Logf("the first frame (%d rectangles) came %v after the websocket opened", len(upd.Rects), time.Since(opened).Round(100*time.Millisecond))

	// The OS image's sound: froog-desktop has it (PulseAudio and ffmpeg
	// are in the image), and a listener through the edge gets its Opus.
	if out := e.sh(t, "xfce", "froog-desktop status"); !strings.Contains(out, `"audio_port":`) {
		t.Errorf("the OS image's desktop has no sound: %s", out)
	} else {
		n, err := e.listen(t, u.Host, cookie, 10, 2*time.Minute)
		if err != nil {
			t.Errorf("sound through the edge: %v; in the VM: %s", err, e.sh(t, "xfce", "pgrep -a pulseaudio; pgrep -a ffmpeg; tail -20 ~/.local/state/froog-desktop/desktop.log"))
		}
		t.Logf("sound: %d Opus packets through the edge", n)
	}

	// The wall: the sandbox's tile shows its XFCE desktop once the panel
	// is up (XFCE takes a while under TCG).
	wl, _ := url.Parse(e.wallLink(t))
	if st, cookie = e.session(t, wl.Host, wl.Fragment); st != 200 {
		t.Fatalf("the wall link's exchange: %d", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+wl.Host+"/events", nil)
	req.Header.Set("Cookie", cookie)
	res, err := e.web.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("the wall's events: %v %v", res, err)
	}
	defer res.Body.Close()
	go io.Copy(io.Discard, res.Body) // the wall stays open while its events are read
	var tile image.Image
	var why string
	if !wait.Until(4*time.Minute, func() bool {
		r, body := visit(t, e.web, "GET", "https://"+wl.Host+"/tile/"+sb.ID+".jpg", "Cookie", cookie)
		if r.StatusCode != 200 {
			why = fmt.Sprintf("status %d", r.StatusCode)
			return false
		}
		if tile, err = jpeg.Decode(strings.NewReader(body)); err != nil {
			why = err.Error()
			return false
		}
		keep(t, "e2e-qemu-xfce-tile.jpg", []byte(body))
		why = xfceLooks(tile)
		return why == ""
	}) {
		t.Fatalf("the tile never showed an XFCE desktop: %s (e2e-qemu-xfce-tile.jpg); in the VM: %s", why,
			e.sh(t, "xfce", "froog-desktop status; pgrep -a xfce4-panel; pgrep -a xfwm4; tail -5 ~/.local/state/froog/desktop.log 2>/dev/null || true"))
	}
	t.Logf("the tile showed XFCE %v after the desktop was opened", time.Since(opened).Round(time.Second))
	if out := e.sh(t, "xfce", "pgrep -c xfce4-panel"); strings.TrimSpace(out) == "0" {
		t.Errorf("no xfce4-panel runs in the VM")
	}
}

// xfceLooks says why a tile is not a picture of an XFCE desktop, or ""
// when it is one: mostly froog-desktop's background (#3b4252, there is no
// wallpaper), not black, and a panel's worth of other pixels.
func xfceLooks(img image.Image) string {
	b := img.Bounds()
	background := share(img, b, [3]uint8{0x3b, 0x42, 0x52})
	black := share(img, b, [3]uint8{0, 0, 0})
	colours := map[[3]uint8]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			p := rgb(img, x, y)
			colours[[3]uint8{p[0] >> 4, p[1] >> 4, p[2] >> 4}] = true
		}
	}
	switch {
	case black > 0.5:
		return fmt.Sprintf("%.0f%% black", 100*black)
	case background < 0.5:
		return fmt.Sprintf("only %.0f%% the desktop's background", 100*background)
	case background > 0.995 || len(colours) < 8:
		return fmt.Sprintf("%.1f%% background and %d colours: no panel", 100*background, len(colours))
	}
	return ""
}
