package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"froog.tech/froog/history"
	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/internal/health"
	"froog.tech/froog/internal/keyfile"
	"froog.tech/froog/sandboxio"
)

// hostctlConfig is froogd hostctl's configuration.
type hostctlConfig struct {
	DatabaseURL, ControlKeyFile string
	HostName, MetricsAddr       string
	Data                        string // the sandboxes' files
	Capacity                    int    // sandboxes this host runs at once
	// AdvertiseAddr is the IP address other machines reach this host's
	// sandboxes on; HeartbeatSecs and DownSecs pace the heartbeat.
	AdvertiseAddr           string
	HeartbeatSecs, DownSecs int
	Driver                  driverConfig
	Tunnel                  tunnelConfig
	// SecretKeyFile opens the accounts' secret files and setup scripts,
	// written into sandboxes at their start; "" writes none.
	SecretKeyFile string
}

func (c *hostctlConfig) bind(f flags) {
	f.str(&c.DatabaseURL, "database-url", "", "Postgres connection string (required)")
	f.str(&c.HostName, "host-name", "", "this host's name (required)")
	c.Driver.bind(f)
	f.str(&c.Data, "data", "./.froog", "data folder for the sandboxes' files")
	f.num(&c.Capacity, "capacity", 16, "sandboxes this host runs at once")
	f.str(&c.AdvertiseAddr, "advertise-addr", "127.0.0.1", "the IP address of this host that edges and the API reach its sandboxes' SSH on (the driver listens there); 127.0.0.1 when every role runs on this machine")
	f.num(&c.HeartbeatSecs, "heartbeat-secs", 5, "how often this host tells the store it is alive")
	f.num(&c.DownSecs, "host-down-secs", 30, "a host silent this long is marked down and its sandboxes go to error (every hostctl checks); at least twice --heartbeat-secs")
	f.str(&c.ControlKeyFile, "control-key-file", "", "the control plane's SSH private key; sandboxes accept its public half (required)")
	f.str(&c.SecretKeyFile, "secret-key-file", "", "the 32-byte key file the API processes share (their --secret-key-file): it opens the accounts' secret files and setup scripts, written into each sandbox at its start; without it a sandbox whose account has secret files or a setup script gets setup_status failed, saying this host has no key for the account's environment")
	bindMetrics(f, &c.MetricsAddr)
	c.Tunnel.bind(f)
}

func (c *hostctlConfig) validate() error {
	errs := required(map[string]string{"--database-url": c.DatabaseURL, "--host-name": c.HostName, "--control-key-file": c.ControlKeyFile})
	errs = append(errs, c.Driver.validate(), c.Tunnel.validate())
	if c.Capacity < 1 {
		errs = append(errs, errors.New("--capacity must be at least 1"))
	}
	if ip := net.ParseIP(c.AdvertiseAddr); ip == nil || ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("--advertise-addr %q: want one IP address of this host", c.AdvertiseAddr))
	}
	if c.HeartbeatSecs < 1 || c.DownSecs < 2*c.HeartbeatSecs {
		errs = append(errs, errors.New("--heartbeat-secs must be at least 1, --host-down-secs at least twice it"))
	}
	return errors.Join(errs...)
}

// driverConfig chooses and configures the driver that runs sandboxes, and
// the host memory hostctl keeps free for them.
type driverConfig struct {
	Driver, Kernel, Initrd, Accel, Net, Images string
	Subnet6                                    string
	CPUs, MemoryMB, DiskGB, MinFreeMB          int
	WarmSecs                                   int
}

func (d *driverConfig) bind(f flags) {
	cache, _ := os.UserCacheDir()
	tiny := filepath.Join(cache, "froog", "tinyvm")
	f.str(&d.Driver, "driver", "local", "local (development; not an isolation boundary) or qemu (a VM per sandbox)")
	f.str(&d.Kernel, "kernel", filepath.Join(tiny, "vmlinux"), "qemu: the guest kernel (deploy/tinyvm/build.sh makes the test guest)")
	f.str(&d.Initrd, "initrd", filepath.Join(tiny, "initramfs.gz"), "qemu: the guest's initramfs")
	f.str(&d.Images, "images", "", "qemu: OS images by os, OS=DIR[,OS=DIR…], each made by deploy/images/build.sh; a sandbox whose os has none boots --kernel and --initrd")
	f.str(&d.Accel, "accel", "auto", "qemu: auto (KVM where it works, else TCG), kvm or tcg")
	f.str(&d.Net, "vm-net", "user", "qemu: user (user-mode networking, no root) or tap (a tap device per VM on bridge froogbr0, isolated by nftables; root)")
	f.str(&d.Subnet6, "vm-subnet6", "", "qemu with --vm-net tap: the prefix of the sandboxes' own public IPv6 addresses, routed to this host (e.g. 2001:db8:1:2::/64), each at its IPv4 address's offset; SSH, ping and their open ports answer there. Empty: no IPv6")
	f.num(&d.CPUs, "vm-cpus", 0, "qemu: vCPUs of every VM whatever its size; 0: the sizes' (2, 4, 8)")
	f.num(&d.MemoryMB, "vm-memory-mb", 0, "qemu: memory of every VM whatever its size; 0: the sizes' (4, 8, 16 GB)")
	f.num(&d.DiskGB, "vm-disk-gb", 10, "qemu: each sandbox's disk")
	f.num(&d.WarmSecs, "warm-secs", 600, "a stopped sandbox stays paused this long, so that a start within it resumes every process")
	f.num(&d.MinFreeMB, "min-free-memory-mb", 1024, "below this much available host memory, warm (stopped, paused) sandboxes give up their processes, the longest stopped first; qemu saves their memory to disk so they still resume with every process")
}

func (d driverConfig) validate() error {
	var errs []error
	switch d.Driver {
	case "local", "qemu":
	default:
		errs = append(errs, fmt.Errorf("--driver %q: want local or qemu", d.Driver))
	}
	if _, err := parseImages(d.Images); err != nil {
		errs = append(errs, err)
	}
	if d.Subnet6 != "" {
		if p, err := netip.ParsePrefix(d.Subnet6); err != nil || !p.Addr().Is6() || d.Net != "tap" {
			errs = append(errs, fmt.Errorf("--vm-subnet6 %q: want an IPv6 prefix, with --vm-net tap", d.Subnet6))
		}
	}
	if d.CPUs < 0 || d.MemoryMB < 0 || d.DiskGB < 1 || d.MinFreeMB < 1 || d.WarmSecs < 1 {
		errs = append(errs, errors.New("--vm-cpus and --vm-memory-mb must be 0 or more, --vm-disk-gb, --min-free-memory-mb and --warm-secs 1 or more"))
	}
	return errors.Join(errs...)
}

var osName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,39}$`)

// parseImages reads --images: OS=DIR pairs, comma-separated.
func parseImages(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		name, dir, ok := strings.Cut(pair, "=")
		switch {
		case !ok || dir == "":
			return nil, fmt.Errorf("--images: %q is not OS=DIR", pair)
		case !osName.MatchString(name):
			return nil, fmt.Errorf("--images: %q is not an os name (lowercase letters, digits, dots and dashes)", name)
		case out[name] != "":
			return nil, fmt.Errorf("--images: %s twice", name)
		}
		out[name] = dir
	}
	return out, nil
}

// openDriver makes the driver, its files under data; the local driver's
// sandboxes close with p (a qemu driver's VMs outlive the process).
func openDriver(p *proc, d driverConfig, data, addr string, sh parts) (hostctl.Driver, error) {
	if d.Driver == "local" {
		drv, err := local.New(local.Options{Dir: filepath.Join(data, "sandboxes"), Addr: addr, ControlKey: sh.key.PublicKey(), Logger: sh.log})
		if err != nil {
			return nil, err
		}
		p.onClose(func() { drv.Close() })
		return drv, nil
	}
	dirs, err := parseImages(d.Images)
	if err != nil {
		return nil, err
	}
	var subnet6 netip.Prefix
	if d.Subnet6 != "" {
		subnet6 = netip.MustParsePrefix(d.Subnet6) // validate checked it
	}
	return qemu.New(qemu.Options{Dir: filepath.Join(data, "vms"), Kernel: d.Kernel, Initrd: d.Initrd, ImageDirs: dirs, Accel: d.Accel, Net: d.Net, Subnet6: subnet6,
		CPUs: d.CPUs, MemoryMB: d.MemoryMB, DiskSize: int64(d.DiskGB) << 30, Addr: addr, ControlKey: sh.key, Logger: sh.log})
}

// startHostctl runs the sandboxes of host c.HostName with c's driver,
// against sh's store, its goroutine in p. It returns its readiness check:
// the controller follows the store.
func startHostctl(p *proc, c hostctlConfig, secret []byte, sh parts) (health.Check, error) {
	drv, err := openDriver(p, c.Driver, c.Data, c.AdvertiseAddr, sh)
	if err != nil {
		return health.Check{}, err
	}
	now, rescan := testClock()
	shell := sandboxio.New(sh.tun)
	sample := func(ctx context.Context, id string) (json.RawMessage, error) {
		return sandboxio.LastSample(ctx, shell, id)
	}
	copier := &history.Copier{Store: sh.store, Jobs: shell, Now: now}
	ctl, err := hostctl.New(hostctl.Options{Store: sh.store, Driver: drv, HostName: c.HostName, Capacity: c.Capacity, Sample: sample, CopyJobs: copier.CopyOpen,
		Address: c.AdvertiseAddr, Heartbeat: time.Duration(c.HeartbeatSecs) * time.Second, DownAfter: time.Duration(c.DownSecs) * time.Second,
		MinFreeMemory: uint64(c.Driver.MinFreeMB) << 20, WarmWindow: time.Duration(c.Driver.WarmSecs) * time.Second, Logger: sh.log,
		Now: now, Rescan: rescan, ControlKey: sh.key, SecretKey: secret})
	if err != nil {
		return health.Check{}, err
	}
	p.Go(ctl.Run)
	down := time.Duration(c.DownSecs) * time.Second
	if down == 0 {
		down = 30 * time.Second // froogd dev: hostctl's default
	}
	sh.reg.MustRegister(hostsCollector{st: sh.store, downAfter: down})
	return health.Check{Name: "reconcile", Run: func(context.Context) error {
		if !ctl.Following() {
			return errors.New("hostctl does not follow the store's change feed: its sandboxes' changes wait")
		}
		return nil
	}}, nil
}

func runHostctl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c hostctlConfig
	if err := parseConfig("hostctl", &c, args, stderr); err != nil {
		return err
	}
	var secret []byte
	if c.SecretKeyFile != "" {
		var err error
		if secret, err = keyfile.LoadSecret(c.SecretKeyFile, secretKeySize); err != nil {
			return err
		}
	}
	// With the tunnel: a stop keeps what ran (Options.Sample).
	return runPG(ctx, "hostctl", c.DatabaseURL, c.ControlKeyFile, c.Tunnel, stderr, func(p *proc, sh parts) error {
		lns, err := listen(p, c.MetricsAddr)
		if err != nil {
			return err
		}
		check, err := startHostctl(p, c, secret, sh)
		if err != nil {
			return err
		}
		serveAdmin(p, lns[0], sh.reg, storeCheck(sh.store), check)
		fmt.Fprintf(stdout, "froog hostctl %s running (%s driver, sandboxes on %s)\n", c.HostName, c.Driver.Driver, c.AdvertiseAddr)
		printAdmin(stdout, lns[0])
		return nil
	})
}
