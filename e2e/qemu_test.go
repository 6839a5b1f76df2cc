package e2e_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testimage"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// The qemu driver's end-to-end check against the real binary: froogd dev
// with a VM per sandbox (the test guest under TCG here), a sandbox created
// through the API reaches running, and a command runs in it through the
// API (SSH against the pinned host key, inside the tunnel).
func TestQEMUSandboxThroughTheAPI(t *testing.T) {
	t.Parallel() // in the VM phase, beside the other VM tests only
	tiny := tinyGuest(t)
	data := t.TempDir()
	// VMs outlive froogd by design; whatever the test leaves, it ends.
	t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
	_, m := start(t, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--domain", "froog.test",
		"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
		"--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", filepath.Join(tiny, "initramfs.gz"),
		"--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1")
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	// The account's SSH key, added before the sandbox exists.
	mine := testkit.NewKey(t)
	pub, _ := json.Marshal(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(mine.PublicKey()))) + " me@laptop")
	c.call("POST", "/v1/ssh-keys", `{"public_key": `+string(pub)+`}`, 201, nil)
	c.call("POST", "/v1/sandboxes", `{"name": "vm-box"}`, 202, nil)
	// While the VM boots, the sandbox says how far its start has got
	// (start_stage, from the driver's console); once it runs, nothing.
	var booting struct {
		State, Error string
		StartStage   string `json:"start_stage"`
	}
	var stages []string
	if !wait.Until(2*time.Minute, func() bool {
		booting.StartStage = ""
		c.call("GET", "/v1/sandboxes/vm-box", "", 200, &booting)
		if n := len(stages); booting.StartStage != "" && (n == 0 || stages[n-1] != booting.StartStage) {
			stages = append(stages, booting.StartStage)
		}
		return booting.State == "running" || booting.State == "error"
	}) || booting.State != "running" {
		t.Fatalf("vm-box never ran: %+v (stages %q)", booting, stages)
	}
	if booting.StartStage != "" || !slices.ContainsFunc(stages, func(s string) bool { return strings.HasPrefix(s, "booting: ") }) {
		t.Fatalf("the start's stages %q, and %q once running: want a booting stage, then none", stages, booting.StartStage)
	}
	t.Logf("vm-box's start: %q", stages)
	var res struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	c.call("POST", "/v1/sandboxes/vm-box/exec", `{"command": "echo hi from $(hostname) as $USER in $HOME"}`, 200, &res)
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "hi from vm-box as user in /home/user" {
		t.Fatalf("exec: %+v", res)
	}
	// The user logs in with their own key, where the API says, against
	// the host key it says.
	var at struct {
		Host, User string
		Port       int
		HostKey    string `json:"host_key"`
	}
	c.call("GET", "/v1/sandboxes/vm-box/ssh", "", 200, &at)
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(at.HostKey))
	if err != nil {
		t.Fatalf("host key %q: %v", at.HostKey, err)
	}
	conn, err := ssh.Dial("tcp", net.JoinHostPort(at.Host, strconv.Itoa(at.Port)), &ssh.ClientConfig{User: at.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(mine)}, HostKeyCallback: ssh.FixedHostKey(hostKey), HostKeyAlgorithms: []string{hostKey.Type()}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("ssh with the account's key: %v", err)
	}
	sess, _ := conn.NewSession()
	out, err := sess.Output("hostname")
	conn.Close()
	if err != nil || strings.TrimSpace(string(out)) != "vm-box" {
		t.Fatalf("over ssh: %q, %v", out, err)
	}
	// A fork through the API: a VM of its own with the source's files.
	c.call("POST", "/v1/sandboxes/vm-box/exec", `{"command": "echo from-the-source > ~/note"}`, 200, nil)
	c.call("POST", "/v1/sandboxes/vm-box/fork", `{"name": "vm-fork"}`, 202, nil)
	runs(t, c, "vm-fork")
	c.call("POST", "/v1/sandboxes/vm-fork/exec", `{"command": "cat ~/note; hostname"}`, 200, &res)
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "from-the-source\nvm-fork" {
		t.Fatalf("in the fork: %+v", res)
	}
	// Auto-start after a warm stop: a request to the sandbox's URL wakes
	// the paused VM and gets the app's answer (busybox's httpd in the
	// test guest, which outlives the exec that starts it).
	c.call("POST", "/v1/sandboxes/vm-box/exec", `{"command": "echo hello-from-the-vm > ~/index.html; busybox httpd -p 8080 -h ~"}`, 200, nil)
	c.call("POST", "/v1/sandboxes/vm-box/wait", `{"port": 8080, "timeout_secs": 30}`, 200, nil)
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/vm-box/urls", `{"port": 8080, "public": true}`, 201, &u)
	c.call("PATCH", "/v1/sandboxes/vm-box", `{"auto_start": true}`, 200, nil)
	c.call("POST", "/v1/sandboxes/vm-box/stop", "", 202, nil)
	var sb struct{ State string }
	wait.For(t, time.Minute, "vm-box stops", func() bool {
		c.call("GET", "/v1/sandboxes/vm-box", "", 200, &sb)
		return sb.State == "stopped"
	})
	web := edgeClient(t, m[2], filepath.Join(data, "ca.pem"), false)
	// A Starting page's watch is the edge's to answer, and wakes nothing.
	page := "https://" + u.Host + "/index.html"
	if st := startWatch(t, web, page, ""); st.State != "stopped" || st.Ready {
		t.Fatalf("a watch of the stopped sandbox: %+v", st)
	}
	held, body := visit(t, web, "GET", page)
	if held.StatusCode != 200 || strings.TrimSpace(body) != "hello-from-the-vm" {
		t.Fatalf("a held request after a warm stop: %d %q", held.StatusCode, body)
	}
	if st := startWatch(t, web, page, ""); !st.Ready {
		t.Fatalf("a watch once the app answers: %+v", st)
	}
	c.call("DELETE", "/v1/sandboxes/vm-fork", "", 202, nil)
	c.call("DELETE", "/v1/sandboxes/vm-box", "", 202, nil)
	wait.For(t, time.Minute, "the VMs end with their sandboxes", func() bool {
		out, _ := exec.Command("pgrep", "-f", filepath.Join(data, "vms")).Output()
		return len(out) == 0
	})
}

// tinyGuest finds the test guest testdeps built (or builds it) and
// returns its folder. Every froogd test that boots a VM gets its guest
// here, and is named TestQEMU…: make test runs those in a phase of their
// own, after the end-to-end tests (VM_TESTS in the Makefile), and this
// fails one that would run beside them (benchmarks aside: make bench).
func tinyGuest(t *testing.T) string {
	t.Helper()
	if name := t.Name(); !strings.HasPrefix(name, vmTests) && !strings.Contains(name, "Bench") {
		t.Fatalf("%s boots a VM: name it %s… so that make test runs it in its VM phase", name, vmTests)
	}
	dir := testimage.Dir(t, "tinyvm")
	// The accelerator, found once (qemutest.Accel) for every froogd the
	// binary starts (FROOG_ACCEL in their environment): --accel auto's
	// own try of KVM is the qemu package's to test.
	accelOnce.Do(func() {
		os.Setenv("FROOG_ACCEL", qemutest.Accel(t, filepath.Join(dir, "vmlinux"), filepath.Join(dir, "initramfs.gz")))
	})
	return dir
}

var accelOnce sync.Once

// vmTests begins the name of every froogd test that boots a VM.
const vmTests = "TestQEMU"

// runs waits until the VM sandbox name runs; an error state ends the wait.
func runs(t *testing.T, c client, name string) {
	t.Helper()
	runsWithin(t, c, name, 2*time.Minute)
}

// The Starting page's view of a VM's boot, through the real binary with
// the test guest under TCG: while a visit to a URL of a sandbox that is
// starting is held, the page's watch (what its script reads, the
// Froog-Start-Watch request) follows the start through its stages —
// booting, at what the guest's console shows — and the visit ends in the
// app's answer, started by the sandbox's own setup at its first boot. A
// guest that cannot boot (an initrd that is not one: the kernel panics,
// QEMU ends) leaves the sandbox in error, and a visit's page and its
// watch say at which stage.
func TestQEMUStartingPage(t *testing.T) {
	t.Parallel() // in the VM phase, beside the other VM tests only
	tiny := tinyGuest(t)
	dev := func(initrd string) (client, *http.Client) {
		data := t.TempDir()
		t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
		_, m := start(t, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--domain", "froog.test",
			"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
			"--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", initrd,
			"--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1")
		key, _ := os.ReadFile(filepath.Join(data, "api-key"))
		return client{t: t, base: m[1], key: strings.TrimSpace(string(key))}, edgeClient(t, m[2], filepath.Join(data, "ca.pem"), false)
	}
	c, web := dev(filepath.Join(tiny, "initramfs.gz"))
	c.call("POST", "/v1/sandboxes", `{"name": "paged", "auto_start": true, "setup": "echo hello-at-first-boot > ~/index.html && busybox httpd -p 8080 -h ~"}`, 202, nil)
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/paged/urls", `{"port": 8080, "public": true}`, 201, &u)
	page := "https://" + u.Host + "/index.html"
	type answer struct {
		code int
		body string
		err  error
	}
	held := make(chan answer, 1)
	go func() {
		res, err := web.Get(page)
		if err != nil {
			held <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		held <- answer{res.StatusCode, string(b), err}
	}()
	w, stages := watchUntilEnded(t, web, page)
	t.Logf("the page's stages: %q", stages)
	if !w.Ready || !slices.ContainsFunc(stages, func(s string) bool { return strings.HasPrefix(s, "booting: ") }) {
		t.Fatalf("the watch ended %+v after stages %q: want a booting stage, then ready", w, stages)
	}
	// The held visit gets the app's answer, or, held past the edge's 20 s,
	// the Starting answer whose page then follows the watch and reloads:
	// once ready, the app's answer.
	a := <-held
	switch {
	case a.err == nil && a.code == 200 && strings.TrimSpace(a.body) == "hello-at-first-boot":
	case a.err == nil && a.code == 503 && strings.Contains(a.body, "sandbox_starting"):
		t.Logf("the held visit outlasted the hold: %.200q", a.body)
	default:
		t.Fatalf("the held visit: %d %.300q %v; want the app's answer or the Starting one", a.code, a.body, a.err)
	}
	if res, body := visit(t, web, "GET", page); res.StatusCode != 200 || strings.TrimSpace(body) != "hello-at-first-boot" {
		t.Fatalf("a visit once the watch says ready: %d %.300q; want the app's answer", res.StatusCode, body)
	}

	notInitrd := filepath.Join(t.TempDir(), "not-an-initrd")
	if err := os.WriteFile(notInitrd, []byte(strings.Repeat("not an initramfs\n", 256)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, web = dev(notInitrd)
	c.call("POST", "/v1/sandboxes", `{"name": "broken", "auto_start": true}`, 202, nil)
	c.call("POST", "/v1/sandboxes/broken/urls", `{"port": 8080, "public": true}`, 201, &u)
	page = "https://" + u.Host + "/"
	// The held visit ends in the page naming the stage, or, when the
	// guest's panic takes longer than the edge's hold (a loaded host),
	// in the Starting page, whose watch then says the start failed; a
	// visit after that gets the failure's page at once.
	const failedPage = "could not start (at booting: "
	res, body := visit(t, web, "GET", page, "Accept", "text/html")
	if res.StatusCode != 503 || !strings.Contains(body, failedPage) && !strings.Contains(body, "sandbox_starting") {
		t.Fatalf("a visit to a sandbox whose guest cannot boot: %d %.300q; want the page naming the stage, or the Starting one", res.StatusCode, body)
	}
	failed, _ := watchUntilEnded(t, web, page)
	if !failed.Failed || !strings.HasPrefix(failed.Stage, "booting: ") {
		t.Fatalf("the watch of a failed start: %+v; want failed, at a booting stage", failed)
	}
	if res, body = visit(t, web, "GET", page, "Accept", "text/html"); res.StatusCode != 503 || !strings.Contains(body, failedPage) {
		t.Fatalf("a visit once the watch says failed: %d %.300q; want the page naming the stage", res.StatusCode, body)
	}
	var sb struct{ State, Error string }
	c.call("GET", "/v1/sandboxes/broken", "", 200, &sb)
	if sb.State != "error" || !strings.Contains(sb.Error, "exited while booting") {
		t.Fatalf("the broken sandbox: %+v; want error, the guest exited while booting", sb)
	}
	t.Logf("the failed start's stage: %q; its error: %.200q", failed.Stage, sb.Error)
}

// startStatus is a Starting page's watch: where the start of the page's
// sandbox is.
type startStatus struct {
	State, Stage, Version string
	Ready, Failed         bool
}

// startWatch asks what a Starting page's script asks (Froog-Start-Watch):
// where the start is, once it differs from seen ("" at once).
func startWatch(t *testing.T, web *http.Client, page, seen string) (st startStatus) {
	t.Helper()
	req, _ := http.NewRequest("GET", page, nil)
	req.Header.Set("Froog-Start-Watch", seen)
	res, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&st); res.StatusCode != 200 || err != nil {
		t.Fatalf("a watch: %d, %v", res.StatusCode, err)
	}
	return st
}

// watchUntilEnded follows page's watch, as the Starting page's script
// does, until the start is ready or failed (3 minutes at most), and
// returns its last answer and the stages it named, each once.
func watchUntilEnded(t *testing.T, web *http.Client, page string) (w startStatus, stages []string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); !w.Ready && !w.Failed; {
		if time.Now().After(deadline) {
			t.Fatalf("the start's watch never ended: %+v (stages %q)", w, stages)
		}
		w = startWatch(t, web, page, w.Version)
		if n := len(stages); w.Stage != "" && (n == 0 || stages[n-1] != w.Stage) {
			stages = append(stages, w.Stage)
		}
	}
	return w, stages
}
