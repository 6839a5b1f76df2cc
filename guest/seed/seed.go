// Package seed is froog-init: it gives an OS image's guest what its
// NoCloud seed says (the ISO 9660 disk labelled cidata that hostctl's qemu
// driver writes), early in every boot, before the network and the SSH
// server start. It does what cloud-init's init stage did for froog's
// images, and no more: the hostname, the SSH host key hostctl pinned
// (and no other), user with passwordless sudo and the keys that may log
// in, eth0's addresses, and the root file system grown to its disk.
//
// cloud-init took a third of a boot under TCG (its Python process alone
// 10 to 24 s before its first stage), and finished only after the last
// unit; this is one Go process that is done in well under a second.
//
// It reads the seed's format as cloud-init documents it (meta-data,
// #cloud-config user-data, network-config version 2), the subset froog
// writes (hostctl/qemu's Seed). It imports nothing of froog's host side:
// it runs in the guest, as froogd called froog-init.
package seed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"
)

// Name is the program's name: froogd run as froog-init is this program.
const Name = "froog-init"

// Seed is what froog-init takes from a seed.
type Seed struct {
	InstanceID, Hostname string
	// HostKey is the SSH host key (OpenSSH PEM) and HostKeyPublic its
	// public half, as authorized_keys has it.
	HostKey, HostKeyPublic string
	User                   User
	Network                Network
}

// User is the account that logs in: user, uid 1000, in froog's seeds.
type User struct {
	Name, Shell    string
	UID            int
	Sudo           string // a sudoers rule, e.g. "ALL=(ALL) NOPASSWD:ALL"; empty: none
	AuthorizedKeys []string
}

// Network is eth0's: DHCP, or addresses with their routes and name server.
type Network struct {
	DHCP               bool
	Addresses          []netip.Prefix
	Gateway4, Gateway6 netip.Addr
	DNS                []netip.Addr
}

// The files' shapes, as cloud-init documents them (the keys froog uses).
type metaData struct {
	InstanceID    string `yaml:"instance-id"`
	LocalHostname string `yaml:"local-hostname"`
}

type userData struct {
	Hostname string `yaml:"hostname"`
	SSHKeys  struct {
		Private string `yaml:"ed25519_private"`
		Public  string `yaml:"ed25519_public"`
	} `yaml:"ssh_keys"`
	Users []struct {
		Name              string   `yaml:"name"`
		UID               int      `yaml:"uid"`
		Shell             string   `yaml:"shell"`
		Sudo              string   `yaml:"sudo"`
		SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys"`
	} `yaml:"users"`
}

type networkConfig struct {
	Version   int `yaml:"version"`
	Ethernets map[string]struct {
		DHCP4       bool     `yaml:"dhcp4"`
		Addresses   []string `yaml:"addresses"`
		Gateway4    string   `yaml:"gateway4"`
		Gateway6    string   `yaml:"gateway6"`
		Nameservers struct {
			Addresses []string `yaml:"addresses"`
		} `yaml:"nameservers"`
	} `yaml:"ethernets"`
}

// A name is one label: what sethostname and /etc/hosts take, and what a
// sandbox's name is.
var (
	hostnameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	userRE     = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	instanceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// Read parses a seed's three files from dir. Every problem is an error,
// all of them at once; nothing is applied from a seed that has one.
func Read(dir fs.FS) (Seed, error) {
	var errs []error
	file := func(name string, v any) {
		b, err := fs.ReadFile(dir, name)
		if err == nil {
			err = yaml.Unmarshal(b, v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("seed: %s: %w", name, err))
		}
	}
	var md metaData
	var ud userData
	var nc networkConfig
	file("meta-data", &md)
	if b, err := fs.ReadFile(dir, "user-data"); err == nil && !bytes.HasPrefix(b, []byte("#cloud-config\n")) {
		errs = append(errs, errors.New("seed: user-data: not #cloud-config"))
	}
	file("user-data", &ud)
	file("network-config", &nc)
	if len(errs) > 0 {
		return Seed{}, errors.Join(errs...)
	}
	s := Seed{InstanceID: md.InstanceID, Hostname: ud.Hostname, HostKey: ud.SSHKeys.Private, HostKeyPublic: strings.TrimSpace(ud.SSHKeys.Public)}
	if s.Hostname == "" {
		s.Hostname = md.LocalHostname
	}
	if !instanceRE.MatchString(s.InstanceID) {
		errs = append(errs, fmt.Errorf("seed: instance-id %q", s.InstanceID))
	}
	if !hostnameRE.MatchString(s.Hostname) {
		errs = append(errs, fmt.Errorf("seed: hostname %q is not one DNS label", s.Hostname))
	}
	if signer, err := ssh.ParsePrivateKey([]byte(s.HostKey)); err != nil {
		errs = append(errs, fmt.Errorf("seed: the host key: %w", err))
	} else if pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s.HostKeyPublic)); err != nil || !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		errs = append(errs, errors.New("seed: the host key's public half is not the private key's"))
	} else if signer.PublicKey().Type() != ssh.KeyAlgoED25519 {
		errs = append(errs, fmt.Errorf("seed: the host key is %s, want ed25519", signer.PublicKey().Type()))
	}
	if len(ud.Users) != 1 {
		errs = append(errs, fmt.Errorf("seed: %d users, want 1", len(ud.Users)))
	} else {
		u := ud.Users[0]
		s.User = User{Name: u.Name, UID: u.UID, Shell: u.Shell, Sudo: u.Sudo}
		if !userRE.MatchString(u.Name) || u.UID < 1000 || u.UID > 60000 || !strings.HasPrefix(u.Shell, "/") || strings.ContainsAny(u.Shell+u.Sudo, "\n\x00") {
			errs = append(errs, fmt.Errorf("seed: user %q (uid %d, shell %q)", u.Name, u.UID, u.Shell))
		}
		for _, k := range u.SSHAuthorizedKeys {
			if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k)); err != nil || strings.ContainsAny(k, "\n\x00") {
				errs = append(errs, fmt.Errorf("seed: an authorized key does not parse: %.40q", k))
				continue
			}
			s.User.AuthorizedKeys = append(s.User.AuthorizedKeys, strings.TrimSpace(k))
		}
	}
	eth, ok := nc.Ethernets["eth0"]
	switch {
	case nc.Version != 2 || !ok || len(nc.Ethernets) != 1:
		errs = append(errs, errors.New("seed: network-config: want version 2 with eth0 alone"))
	case eth.DHCP4:
		s.Network.DHCP = true
	default:
		for _, a := range eth.Addresses {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				errs = append(errs, fmt.Errorf("seed: network-config: %w", err))
				continue
			}
			s.Network.Addresses = append(s.Network.Addresses, p)
		}
		for _, g := range []struct {
			text string
			to   *netip.Addr
			v4   bool
		}{{eth.Gateway4, &s.Network.Gateway4, true}, {eth.Gateway6, &s.Network.Gateway6, false}} {
			if g.text == "" {
				continue
			}
			a, err := netip.ParseAddr(g.text)
			if err != nil || a.Is4() != g.v4 {
				errs = append(errs, fmt.Errorf("seed: network-config: gateway %q", g.text))
				continue
			}
			*g.to = a
		}
		for _, d := range eth.Nameservers.Addresses {
			a, err := netip.ParseAddr(d)
			if err != nil {
				errs = append(errs, fmt.Errorf("seed: network-config: %w", err))
				continue
			}
			s.Network.DNS = append(s.Network.DNS, a)
		}
		if len(s.Network.Addresses) == 0 {
			errs = append(errs, errors.New("seed: network-config: eth0 has neither DHCP nor an address"))
		}
	}
	if len(errs) > 0 {
		return Seed{}, errors.Join(errs...)
	}
	return s, nil
}

// System is what Apply changes beyond files under its root: the running
// kernel's hostname and the commands it runs. Tests give a fake.
type System interface {
	SetHostname(name string) error
	Run(name string, args ...string) error
}

// Apply gives the system under root what s says. At every boot: the
// hostname, the host key (the only one), the network's configuration and
// the root file system grown to its disk (rootDev; empty: not grown). On
// an instance's first boot (its id not the one recorded): the user, its
// sudo rule and its keys; hostctl writes the keys again at every start.
func Apply(root string, s Seed, rootDev string, sys System) error {
	at := func(p string) string { return filepath.Join(root, p) }
	var errs []error
	write := func(p string, mode os.FileMode, data string) {
		if err := writeFile(at(p), mode, data); err != nil {
			errs = append(errs, err)
		}
	}
	write("etc/hostname", 0o644, s.Hostname+"\n")
	write("etc/hosts", 0o644, fmt.Sprintf("127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost ip6-loopback\nff02::1 ip6-allnodes\nff02::2 ip6-allrouters\n", s.Hostname))
	if err := sys.SetHostname(s.Hostname); err != nil {
		errs = append(errs, fmt.Errorf("seed: sethostname: %w", err))
	}
	old, _ := filepath.Glob(at("etc/ssh/ssh_host_*_key*"))
	for _, f := range old {
		if base := filepath.Base(f); base != "ssh_host_ed25519_key" && base != "ssh_host_ed25519_key.pub" {
			os.Remove(f)
		}
	}
	write("etc/ssh/ssh_host_ed25519_key", 0o600, strings.TrimSpace(s.HostKey)+"\n")
	write("etc/ssh/ssh_host_ed25519_key.pub", 0o644, s.HostKeyPublic+"\n")
	ifaces, resolv := s.Network.files()
	write("etc/network/interfaces.d/50-froog", 0o644, ifaces)
	if resolv != "" {
		os.Remove(at("etc/resolv.conf")) // a link to a resolver this image does not run
		write("etc/resolv.conf", 0o644, resolv)
	}
	if rootDev != "" {
		if err := sys.Run("resize2fs", rootDev); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	const instanceFile = "var/lib/froog/instance-id"
	if b, err := os.ReadFile(at(instanceFile)); err == nil && string(b) == s.InstanceID+"\n" {
		return nil
	}
	if err := s.User.create(root, sys); err != nil {
		return err
	}
	return writeFile(at(instanceFile), 0o644, s.InstanceID+"\n")
}

// files are the network's ifupdown stanza for eth0 and, for a static
// one, /etc/resolv.conf ("" for DHCP, whose client writes it).
func (n Network) files() (ifaces, resolv string) {
	var b strings.Builder
	b.WriteString("# froog-init, from the seed: written again at every boot\nauto eth0\n")
	if n.DHCP {
		b.WriteString("iface eth0 inet dhcp\n")
		return b.String(), ""
	}
	for _, v4 := range []bool{true, false} {
		family, gw, first := "inet", n.Gateway4, true
		if !v4 {
			family, gw = "inet6", n.Gateway6
		}
		for _, p := range n.Addresses {
			if p.Addr().Is4() != v4 {
				continue
			}
			if first {
				fmt.Fprintf(&b, "iface eth0 %s static\n", family)
				if !v4 {
					b.WriteString("    accept_ra 0\n    autoconf 0\n")
				}
				if gw.IsValid() {
					fmt.Fprintf(&b, "    gateway %s\n", gw)
				}
				first = false
			}
			fmt.Fprintf(&b, "    address %s\n", p)
		}
	}
	var r strings.Builder
	for _, d := range n.DNS {
		fmt.Fprintf(&r, "nameserver %s\n", d)
	}
	return b.String(), r.String()
}

// create makes the user where it does not exist (its home from the
// skeleton, a group of its own, no password), its sudo rule and its keys.
func (u User) create(root string, sys System) error {
	if !hasUser(filepath.Join(root, "etc/passwd"), u.Name) {
		args := []string{"--create-home", "--user-group", "--uid", strconv.Itoa(u.UID), "--shell", u.Shell, u.Name}
		if root != "/" {
			args = append([]string{"--root", root}, args...)
		}
		if err := sys.Run("useradd", args...); err != nil {
			return err
		}
	}
	sudoers := filepath.Join(root, "etc/sudoers.d/90-froog-user")
	if u.Sudo == "" {
		os.Remove(sudoers)
	} else if err := writeFile(sudoers, 0o440, u.Name+" "+u.Sudo+"\n"); err != nil {
		return err
	}
	home := filepath.Join(root, "home", u.Name)
	keys := strings.Join(u.AuthorizedKeys, "\n") + "\n"
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := writeFile(filepath.Join(home, ".ssh/authorized_keys"), 0o600, keys); err != nil {
		return err
	}
	gid := u.UID
	if g, ok := userGID(filepath.Join(root, "etc/passwd"), u.Name); ok {
		gid = g
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), filepath.Join(home, ".ssh/authorized_keys")} {
		if err := os.Lchown(p, u.UID, gid); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

// hasUser says whether passwd lists name.
func hasUser(passwd, name string) bool {
	_, ok := userGID(passwd, name)
	return ok
}

// userGID is name's primary group in passwd.
func userGID(passwd, name string) (int, bool) {
	b, err := os.ReadFile(passwd)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 4 && f[0] == name {
			gid, err := strconv.Atoi(f[3])
			return gid, err == nil
		}
	}
	return 0, false
}

// writeFile replaces path with data, whole (a temporary file renamed
// over it), with mode.
func writeFile(path string, mode os.FileMode, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	tmp := path + ".froog-new"
	if err := os.WriteFile(tmp, []byte(data), mode); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // past the umask
		return fmt.Errorf("seed: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}

// host is the System of the guest froog-init runs in.
type host struct{}

func (host) SetHostname(name string) error { return setHostname(name) }

func (host) Run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("seed: %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}
