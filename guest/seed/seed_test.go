package seed_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/guest/seed"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/internal/sshkey"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
)

// hostSeed is a seed as hostctl's qemu driver writes it.
func hostSeed(t testing.TB) qemu.Seed {
	t.Helper()
	dir := t.TempDir()
	_, pemBytes, err := sshkey.LoadOrCreate(filepath.Join(dir, "host_key"), "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	user := testkit.NewKey(t)
	return qemu.Seed{InstanceID: "sbx_0123abcd", Hostname: "vm-box", HostKeyPEM: string(pemBytes),
		HostKeyPublic:  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))),
		AuthorizedKeys: []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(user.PublicKey())))},
		Address:        "10.213.0.7/16", Gateway: "10.213.0.1", DNS: "10.213.0.1"}
}

func files(s qemu.Seed) fstest.MapFS {
	m := fstest.MapFS{}
	for name, b := range s.Files() {
		m[name] = &fstest.MapFile{Data: b}
	}
	return m
}

// What the host writes, the guest reads: every field, for each network.
func TestReadsWhatHostctlWrites(t *testing.T) {
	t.Parallel()
	base := hostSeed(t)
	for _, tc := range []struct {
		name string
		edit func(*qemu.Seed)
		want seed.Network
	}{
		{"static", func(*qemu.Seed) {}, seed.Network{Addresses: []netip.Prefix{netip.MustParsePrefix("10.213.0.7/16")},
			Gateway4: netip.MustParseAddr("10.213.0.1"), DNS: []netip.Addr{netip.MustParseAddr("10.213.0.1")}}},
		{"static with IPv6", func(s *qemu.Seed) { s.Address6, s.Gateway6 = "2001:db8::7/64", "2001:db8::1" }, seed.Network{
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.213.0.7/16"), netip.MustParsePrefix("2001:db8::7/64")},
			Gateway4:  netip.MustParseAddr("10.213.0.1"), Gateway6: netip.MustParseAddr("2001:db8::1"), DNS: []netip.Addr{netip.MustParseAddr("10.213.0.1")}}},
		{"DHCP", func(s *qemu.Seed) { s.Address, s.Gateway, s.DNS = "", "", "" }, seed.Network{DHCP: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := base
			tc.edit(&hs)
			got, err := seed.Read(files(hs))
			if err != nil {
				t.Fatal(err)
			}
			if got.InstanceID != hs.InstanceID || got.Hostname != hs.Hostname || strings.TrimSpace(got.HostKey) != strings.TrimSpace(hs.HostKeyPEM) ||
				got.HostKeyPublic != hs.HostKeyPublic {
				t.Fatalf("identity: %q %q %q, want %q %q %q", got.InstanceID, got.Hostname, got.HostKeyPublic, hs.InstanceID, hs.Hostname, hs.HostKeyPublic)
			}
			if u := got.User; u.Name != "user" || u.UID != 1000 || u.Shell != "/bin/bash" || u.Sudo != "ALL=(ALL) NOPASSWD:ALL" || !slices.Equal(u.AuthorizedKeys, hs.AuthorizedKeys) {
				t.Fatalf("user: %+v", u)
			}
			n := got.Network
			if n.DHCP != tc.want.DHCP || !slices.Equal(n.Addresses, tc.want.Addresses) || n.Gateway4 != tc.want.Gateway4 || n.Gateway6 != tc.want.Gateway6 || !slices.Equal(n.DNS, tc.want.DNS) {
				t.Fatalf("network: %+v, want %+v", n, tc.want)
			}
		})
	}
}

// A seed with any of these wrong is refused whole, saying what.
func TestReadRefusesBadSeeds(t *testing.T) {
	t.Parallel()
	hs := hostSeed(t)
	other := hostSeed(t)
	good := files(hs)
	replace := func(name, from, to string) fstest.MapFS {
		m := fstest.MapFS{}
		for n, f := range good {
			m[n] = f
		}
		s := string(good[name].Data)
		if !strings.Contains(s, from) {
			t.Fatalf("%s has no %q", name, from)
		}
		m[name] = &fstest.MapFile{Data: []byte(strings.Replace(s, from, to, 1))}
		return m
	}
	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"no meta-data", fstest.MapFS{"user-data": good["user-data"], "network-config": good["network-config"]}, "meta-data"},
		{"not YAML", replace("meta-data", "instance-id: ", "instance-id: [unclosed "), "meta-data"},
		{"not cloud-config", replace("user-data", "#cloud-config", "#!/bin/sh"), "not #cloud-config"},
		{"a hostname of two labels", replace("user-data", "hostname: vm-box", "hostname: vm.box"), "hostname"},
		{"a hostname with a newline", replace("user-data", "hostname: vm-box", `hostname: "vm\nbox"`), "hostname"},
		{"an instance id with a slash", replace("meta-data", "sbx_0123abcd", "../etc"), "instance-id"},
		{"another key's public half", replace("user-data", hs.HostKeyPublic, other.HostKeyPublic), "public half"},
		{"no host key", replace("user-data", "ed25519_private", "rsa_private"), "host key"},
		{"root as the user", replace("user-data", "uid: 1000", "uid: 0"), "user"},
		{"a relative shell", replace("user-data", "shell: /bin/bash", "shell: bash"), "user"},
		{"a key that does not parse", replace("user-data", "      - ssh-ed25519 ", "      - ssh-ed25519 !!"), "authorized key"},
		{"network version 1", replace("network-config", "version: 2", "version: 1"), "version 2"},
		{"an address without a prefix", replace("network-config", "10.213.0.7/16", "10.213.0.7"), "network-config"},
		{"an IPv6 gateway4", replace("network-config", "gateway4: 10.213.0.1", "gateway4: 2001:db8::1"), "gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := seed.Read(tc.fs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	hs := hostSeed(f)
	for _, edit := range []func(*qemu.Seed){func(*qemu.Seed) {}, func(s *qemu.Seed) { s.Address = "" }, func(s *qemu.Seed) { s.Address6, s.Gateway6 = "fd00::2/64", "fd00::1" }} {
		s := hs
		edit(&s)
		m := s.Files()
		f.Add(m["meta-data"], m["user-data"], m["network-config"])
	}
	f.Fuzz(func(t *testing.T, md, ud, nc []byte) {
		s, err := seed.Read(fstest.MapFS{"meta-data": {Data: md}, "user-data": {Data: ud}, "network-config": {Data: nc}})
		if err != nil {
			return
		}
		// What is read is safe to write into files and a command line.
		for _, v := range []string{s.InstanceID, s.Hostname, s.User.Name, s.User.Shell, s.User.Sudo} {
			if strings.ContainsAny(v, "\n\x00") {
				t.Fatalf("a field with a newline or NUL: %q", v)
			}
		}
		if strings.Contains(s.InstanceID, "/") || s.User.UID < 1000 {
			t.Fatalf("instance %q, uid %d", s.InstanceID, s.User.UID)
		}
	})
}

// fakeSystem is Apply's System in a test: it records the hostname and
// the commands, and useradd adds the user to the root's passwd.
type fakeSystem struct {
	root     string
	hostname string
	ran      []string
}

func (f *fakeSystem) SetHostname(name string) error { f.hostname = name; return nil }

func (f *fakeSystem) Run(name string, args ...string) error {
	f.ran = append(f.ran, name+" "+strings.Join(args, " "))
	if name == "useradd" {
		user := args[len(args)-1]
		p, err := os.OpenFile(filepath.Join(f.root, "etc/passwd"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer p.Close()
		_, err = p.WriteString(user + ":x:1000:1000::/home/" + user + ":/bin/bash\n")
		return err
	}
	return nil
}

func TestApply(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		// Apply gives the user its home: a chown to uid 1000.
		testdep.Missing(t, "Apply's chown wants root; make test runs as root")
	}
	hs := hostSeed(t)
	hs.Address6, hs.Gateway6 = "2001:db8::7/64", "2001:db8::1"
	s, err := seed.Read(files(hs))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "etc/ssh"), 0o755))
	for _, k := range []string{"ssh_host_rsa_key", "ssh_host_rsa_key.pub", "ssh_host_ecdsa_key"} {
		must(os.WriteFile(filepath.Join(root, "etc/ssh", k), []byte("old"), 0o600))
	}
	must(os.Symlink("/run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")))
	sys := &fakeSystem{root: root}
	must(seed.Apply(root, s, "/dev/vda", sys))

	read := func(p string) (string, os.FileMode) {
		t.Helper()
		st, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(root, p))
		return string(b), st.Mode()
	}
	for _, tc := range []struct {
		path, want string
		mode       os.FileMode
	}{
		{"etc/hostname", "vm-box\n", 0o644},
		{"etc/ssh/ssh_host_ed25519_key.pub", hs.HostKeyPublic + "\n", 0o644},
		{"etc/network/interfaces.d/50-froog", "auto eth0\niface eth0 inet static\n    gateway 10.213.0.1\n    address 10.213.0.7/16\n" +
			"iface eth0 inet6 static\n    accept_ra 0\n    autoconf 0\n    gateway 2001:db8::1\n    address 2001:db8::7/64\n", 0o644},
		{"etc/resolv.conf", "nameserver 10.213.0.1\n", 0o644},
		{"etc/sudoers.d/90-froog-user", "user ALL=(ALL) NOPASSWD:ALL\n", 0o440},
		{"home/user/.ssh/authorized_keys", hs.AuthorizedKeys[0] + "\n", 0o600},
	} {
		got, mode := read(tc.path)
		if !strings.HasSuffix(got, tc.want) || mode != tc.mode {
			t.Errorf("%s: %q (%v), want it to end %q (%v)", tc.path, got, mode, tc.want, tc.mode)
		}
	}
	if hosts, _ := read("etc/hosts"); !strings.Contains(hosts, "127.0.1.1 vm-box\n") || !strings.Contains(hosts, "127.0.0.1 localhost\n") {
		t.Errorf("/etc/hosts: %q", hosts)
	}
	if key, mode := read("etc/ssh/ssh_host_ed25519_key"); mode != 0o600 || !strings.Contains(key, "PRIVATE KEY") {
		t.Errorf("the host key: %v", mode)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*")); len(left) != 2 {
		t.Errorf("host keys left: %q, want the ed25519 pair alone", left)
	}
	if st, err := os.Stat(filepath.Join(root, "home/user/.ssh")); err != nil || st.Mode().Perm() != 0o700 || st.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Errorf("~/.ssh: %v %v, want 0700 and user's", st, err)
	}
	if sys.hostname != "vm-box" || !slices.Equal(sys.ran, []string{"resize2fs /dev/vda", "useradd --root " + root + " --create-home --user-group --uid 1000 --shell /bin/bash user"}) {
		t.Fatalf("hostname %q, ran %q", sys.hostname, sys.ran)
	}

	// The next boot of the same instance: the user is left as it is
	// (hostctl writes its keys at every start).
	must(os.WriteFile(filepath.Join(root, "home/user/.ssh/authorized_keys"), []byte("hostctl's\n"), 0o600))
	sys.ran = nil
	must(seed.Apply(root, s, "/dev/vda", sys))
	if got, _ := read("home/user/.ssh/authorized_keys"); got != "hostctl's\n" || !slices.Equal(sys.ran, []string{"resize2fs /dev/vda"}) {
		t.Fatalf("a second boot: keys %q, ran %q", got, sys.ran)
	}
	// A fork (another instance on the same disk): the seed's keys again,
	// the user not made twice.
	s.InstanceID = "sbx_fork"
	sys.ran = nil
	must(seed.Apply(root, s, "", sys))
	if got, _ := read("home/user/.ssh/authorized_keys"); got != hs.AuthorizedKeys[0]+"\n" || len(sys.ran) != 0 {
		t.Fatalf("a fork's first boot: keys %q, ran %q", got, sys.ran)
	}
}
