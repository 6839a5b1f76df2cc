package deploy_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"froog.tech/froog/internal/testdep"
)

// The Debian package, built as `make package` builds it, checked the way
// an operator's machine would take it, without booting one: lintian on
// the .deb; dpkg installs it into a scratch root (dpkg --root, the
// maintainer scripts run outside a chroot with DPKG_ROOT set, as Debian's
// own bootstrap tools do), which creates the system user and the state
// folder there; systemd-analyze verifies and scores every unit inside
// that root (with this machine's systemd units beside them, as on a
// Debian system); the example environment files name every flag of their
// role; and dpkg purges it again. What is not tested here: starting the
// units under a running systemd (this machine's PID 1 is not systemd).
func TestDebianPackage(t *testing.T) {
	t.Parallel() // beside TestPackageUnderSystemd's boot
	if os.Getuid() != 0 {
		testdep.Missing(t, "dpkg --root needs root to give files their owners; make test runs as root")
	}
	for _, tool := range []string{"lintian", "systemd-analyze", "systemd-sysusers"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: deploy/testdeps.sh installs it", tool)
		}
	}
	deb := buildDeb(t)
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(deb), "froogd_"), "_amd64.deb")
	if !regexp.MustCompile(`^[0-9][0-9a-z.+~]*$`).MatchString(version) {
		t.Fatalf("package %s: version %q is not a Debian version", deb, version)
	}

	t.Run("lintian", func(t *testing.T) {
		// Warnings fail as errors do; the package's overrides are in
		// deploy/debian/froogd.lintian-overrides, each with its reason.
		out, err := exec.Command("lintian", "--fail-on", "error,warning", deb).CombinedOutput()
		if err != nil {
			t.Fatalf("lintian: %v\n%s", err, out)
		}
	})

	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		os.WriteFile(filepath.Join(root, f), nil, 0o644)
	}
	dpkg := func(args ...string) string {
		t.Helper()
		// --force-depends: the scratch root has no systemd package;
		// --force-script-chrootless: the scripts run with DPKG_ROOT set
		// (systemd-sysusers --root, systemd-tmpfiles --root).
		out, err := exec.Command("dpkg", append([]string{"--root=" + root, "--force-script-chrootless", "--force-depends", "--log=/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	dpkg("-i", deb)
	in := func(p string) string { return filepath.Join(root, p) }

	t.Run("layout", func(t *testing.T) {
		files := map[string]os.FileMode{
			"usr/bin/froogd": 0o755,
			"usr/bin/froog":  0o755,
			"usr/share/bash-completion/completions/froog":    0o644,
			"usr/share/zsh/vendor-completions/_froog":        0o644,
			"usr/share/fish/vendor_completions.d/froog.fish": 0o644,
			"usr/share/man/man1/froog.1.gz":                  0o644,
			"lib/systemd/system/froogd-edge.service":         0o644,
			"lib/systemd/system/froogd-api.service":          0o644,
			"lib/systemd/system/froogd-hostctl.service":      0o644,
			"lib/systemd/system/froogd-migrate.service":      0o644,
			"usr/lib/sysusers.d/froogd.conf":                 0o644,
			"usr/lib/tmpfiles.d/froogd.conf":                 0o644,
			"etc/froog/froog.env":                            0o644,
			"etc/froog/edge.env":                             0o644,
			"etc/froog/api.env":                              0o644,
			"etc/froog/hostctl.env":                          0o644,
			"etc/froog/migrate.env":                          0o644,
			"usr/share/doc/froogd/copyright":                 0o644,
			"usr/share/man/man1/froogd.1.gz":                 0o644,
		}
		for p, mode := range files {
			fi, err := os.Stat(in(p))
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if fi.Mode().Perm() != mode {
				t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), mode)
			}
		}
		status := dpkg("-s", "froogd")
		for _, f := range []string{"froog", "edge", "api", "hostctl", "migrate"} {
			if !strings.Contains(status, "/etc/froog/"+f+".env ") {
				t.Errorf("/etc/froog/%s.env is not a conffile (an upgrade would overwrite the operator's settings):\n%s", f, status)
			}
		}
		out, err := exec.Command(in("usr/bin/froogd"), "version").Output()
		if err != nil || !strings.HasPrefix(string(out), "froogd "+version+" (revision ") || strings.Contains(string(out), "revision unknown") {
			t.Errorf("froogd version: %q %v, want the package's version %s and its commit", out, err, version)
		}
		// The CLI runs, and its bash completions are its own.
		if out, err := exec.Command(in("usr/bin/froog"), "--help").Output(); err != nil || !strings.Contains(string(out), "froog login") {
			t.Errorf("froog --help: %v: %.200s", err, out)
		}
		if b, err := os.ReadFile(in("usr/share/bash-completion/completions/froog")); err != nil || !strings.Contains(string(b), "__start_froog") {
			t.Errorf("froog's bash completions: %v: %.100s", err, b)
		}
	})

	t.Run("user and state", func(t *testing.T) {
		pw := readColon(t, in("etc/passwd"))
		u, ok := pw["froog"]
		if !ok {
			t.Fatalf("no froog user in the root's /etc/passwd: %v", pw)
		}
		if u[5] != "/var/lib/froog" || u[6] != "/usr/sbin/nologin" {
			t.Errorf("froog user %v: want home /var/lib/froog and shell /usr/sbin/nologin", u)
		}
		groups := readColon(t, in("etc/group"))
		if g, ok := groups["kvm"]; !ok || !slices.Contains(strings.Split(g[3], ","), "froog") {
			t.Errorf("group kvm %v: want froog in it (hostctl opens /dev/kvm)", g)
		}
		fi, err := os.Stat(in("var/lib/froog"))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fmt.Sprint(st.Uid) != u[2] || fmt.Sprint(st.Gid) != u[3] || fi.Mode().Perm() != 0o750 {
			t.Errorf("/var/lib/froog: %d:%d %v, want %s:%s 0750", st.Uid, st.Gid, fi.Mode().Perm(), u[2], u[3])
		}
	})

	t.Run("env files name every flag", func(t *testing.T) {
		common := envVars(t, in("etc/froog/froog.env"))
		for _, role := range []string{"edge", "api", "hostctl", "migrate"} {
			flags := flagVars(t, in("usr/bin/froogd"), role)
			file := envVars(t, in("etc/froog/"+role+".env"))
			for _, v := range flags {
				switch file[v] {
				case "":
					t.Errorf("%s.env lacks %s", role, v)
				case "common":
					if common[v] == "" {
						t.Errorf("%s.env says %s is in froog.env; it is not", role, v)
					}
				}
			}
			for v := range file {
				if !slices.Contains(flags, v) {
					t.Errorf("%s.env has %s, which froogd %s has no flag for", role, v, role)
				}
			}
		}
		if common["FROOG_DATABASE_URL"] != "set" || common["FROOG_CONTROL_KEY_FILE"] != "set" {
			t.Errorf("froog.env: %v; want the database URL and the control key set", common)
		}
	})

	units := []string{"edge", "api", "hostctl", "migrate"}
	systemUnits(t, root)
	t.Run("systemd-analyze verify", func(t *testing.T) {
		// verify exits 0 on a directive it cannot parse, and only says so:
		// any output is a failure. First, that it does say so here.
		bad := in("lib/systemd/system/froogd-broken.service")
		os.WriteFile(bad, []byte("[Service]\nExecStart=/usr/bin/froogd edge\nProtectSystem=bogus\n"), 0o644)
		if out, _ := exec.Command("systemd-analyze", "verify", "--root="+root, "/lib/systemd/system/froogd-broken.service").CombinedOutput(); !strings.Contains(string(out), "bogus") {
			t.Fatalf("a broken unit passes verify: %q", out)
		}
		os.Remove(bad)
		for _, u := range units {
			out, err := exec.Command("systemd-analyze", "verify", "--root="+root, "/lib/systemd/system/froogd-"+u+".service").CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("froogd-%s.service: %v\n%s", u, err, out)
			}
		}
	})

	t.Run("hardening", func(t *testing.T) {
		// systemd's own exposure score (0 safest, 10 least safe): the
		// stateless roles must stay at "OK" and low; hostctl runs QEMU
		// with /dev/kvm and, for tap networking, CAP_NET_ADMIN.
		limits := map[string]string{"edge": "20", "api": "20", "migrate": "20", "hostctl": "50"}
		for _, u := range units {
			out, err := exec.Command("systemd-analyze", "security", "--offline=yes", "--root="+root, "--threshold="+limits[u], "/lib/systemd/system/froogd-"+u+".service").CombinedOutput()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if err != nil {
				t.Errorf("froogd-%s.service: exposure over %s/100: %v\n%s", u, limits[u], err, out)
			} else {
				t.Logf("%s", lines[len(lines)-1])
			}
		}
		caps := map[string]string{"edge": "CAP_NET_BIND_SERVICE", "api": "", "migrate": "", "hostctl": "CAP_NET_ADMIN"}
		for _, u := range units {
			d := directives(t, in("lib/systemd/system/froogd-"+u+".service"))
			for k, want := range map[string]string{"User": "froog", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
				"ProtectHome": "yes", "CapabilityBoundingSet": caps[u], "StateDirectory": "froog"} {
				if got, ok := d[k]; !ok || got[len(got)-1] != want {
					t.Errorf("froogd-%s.service: %s=%v, want %q", u, k, got, want)
				}
			}
			if amb := d["AmbientCapabilities"]; caps[u] != "" && (len(amb) != 1 || amb[0] != caps[u]) || caps[u] == "" && len(amb) > 0 {
				t.Errorf("froogd-%s.service: AmbientCapabilities=%v, want %q", u, amb, caps[u])
			}
			if u != "migrate" && (!strings.Contains(strings.Join(d["After"], " "), "froogd-migrate.service") || !strings.Contains(strings.Join(d["Wants"], " "), "froogd-migrate.service")) {
				t.Errorf("froogd-%s.service does not order after froogd-migrate.service: After=%v Wants=%v", u, d["After"], d["Wants"])
			}
		}
	})

	t.Run("purge", func(t *testing.T) {
		dpkg("--purge", "froogd")
		for _, p := range []string{"usr/bin/froogd", "usr/bin/froog", "etc/froog/edge.env", "lib/systemd/system/froogd-edge.service"} {
			if _, err := os.Stat(in(p)); !os.IsNotExist(err) {
				t.Errorf("%s after purge: %v", p, err)
			}
		}
	})
}

var (
	debOnce sync.Once
	debPath string
	debErr  error
	debDir  string // removed by TestMain
)

// buildDeb builds the package as `make package` does, once for every
// test here, and returns its path.
func buildDeb(t *testing.T) string {
	t.Helper()
	testdep.Short(t, "builds the Debian package (minutes)")
	debOnce.Do(func() {
		for _, tool := range []string{"dpkg-buildpackage", "dh"} {
			if _, err := exec.LookPath(tool); err != nil {
				debErr = fmt.Errorf("%s is missing: deploy/testdeps.sh installs it", tool)
				return
			}
		}
		if debDir, debErr = os.MkdirTemp("", "froogd-deb-"); debErr != nil {
			return
		}
		cmd := exec.Command("./package.sh")
		// gzip at its fastest, not dpkg-deb's xz: the same package,
		// built in 6 CPU-seconds rather than 28, and unpacked faster in
		// the TCG guest that installs it.
		cmd.Env = append(os.Environ(), "DIST="+debDir, "DPKG_DEB_COMPRESSOR_TYPE=gzip", "DPKG_DEB_COMPRESSOR_LEVEL=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			debErr = fmt.Errorf("package.sh: %v\n%s", err, out)
			return
		}
		debPath = strings.TrimSpace(string(out))
	})
	if debErr != nil {
		t.Fatal(debErr)
	}
	return debPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if debDir != "" {
		os.RemoveAll(debDir)
	}
	os.Exit(code)
}

// readColon reads an /etc/passwd-like file: name → its fields (the name
// first).
func readColon(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(l, ":")
		m[f[0]] = f
	}
	return m
}

// envVars reads an example environment file: each FROOG_ variable, and
// whether it is set, left commented out with its default ("default"), or
// said to be set in froog.env ("common").
func envVars(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set := regexp.MustCompile(`^(#?)(FROOG_[A-Z0-9_]+)=`)
	common := regexp.MustCompile(`^# (FROOG_[A-Z0-9_]+): set in /etc/froog/froog.env$`)
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := set.FindStringSubmatch(sc.Text()); s != nil {
			m[s[2]] = map[string]string{"": "set", "#": "default"}[s[1]]
		} else if s := common.FindStringSubmatch(sc.Text()); s != nil {
			m[s[1]] = "common"
		}
	}
	return m
}

// flagVars lists the FROOG_ form of every flag `froogd ROLE -h` prints.
func flagVars(t *testing.T, bin, role string) []string {
	t.Helper()
	out, _ := exec.Command(bin, role, "-h").CombinedOutput()
	var vars []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		vars = append(vars, "FROOG_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_")))
	}
	if len(vars) == 0 {
		t.Fatalf("froogd %s -h lists no flags: %s", role, out)
	}
	return vars
}

// directives reads a unit file: each key's values, in order.
func directives(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			d[k] = append(d[k], v)
		}
	}
	return d
}

// systemUnits puts this machine's systemd units (targets, sockets, the
// units froog's refer to) into the scratch root beside the package's, as
// the systemd package would on a real system: verify resolves every
// dependency inside the root.
func systemUnits(t *testing.T, root string) {
	t.Helper()
	out, err := exec.Command("cp", "-a", "-n", "/lib/systemd/system/.", filepath.Join(root, "lib/systemd/system")).CombinedOutput()
	if err != nil {
		t.Fatalf("copy the system's units: %v\n%s", err, out)
	}
}
