package qemu

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
)

// Size is a sandbox size's share of the host.
type Size struct {
	CPUs     int
	MemoryMB int
}

// DefaultSizes are the sizes of the docs: small 2 vCPU / 4 GB, default
// 4 / 8, large 8 / 16.
var DefaultSizes = map[string]Size{"small": {2, 4096}, "default": {4, 8192}, "large": {8, 16384}}

// Options configure the driver.
type Options struct {
	// Dir holds the base disks and one folder per sandbox. Required.
	Dir string
	// Kernel and Initrd boot the test image (deploy/tinyvm): what a
	// sandbox whose os has no entry in Images boots, with an empty disk the
	// guest formats on its first boot.
	Kernel, Initrd string
	// Images are OS images by the sandbox's os (deploy/images/build.sh
	// makes them, LoadImage reads one). Kernel and Initrd, or an image, are
	// required.
	Images map[string]Image
	// ImageDirs are more OS images by os, each the folder of one (as
	// deploy/images/build.sh makes it); New loads them into Images, and an
	// os in both is an error. Nil means none.
	ImageDirs map[string]string
	// DiskSize is the size of each sandbox's disk; 0 means 10 GiB.
	DiskSize int64
	// Accel is auto (KVM where /dev/kvm can be opened, TCG otherwise),
	// kvm or tcg.
	Accel string
	// Sizes map a sandbox's size to vCPUs and memory; nil means
	// DefaultSizes.
	Sizes map[string]Size
	// CPUs and MemoryMB, when above 0, replace the vCPUs and the memory
	// of every size (a small host gives every VM the same); 0 keeps each
	// size's own.
	CPUs, MemoryMB int
	// ControlKey is the control plane's key: it may log in to every
	// sandbox, and the driver logs in with it at every start to write the
	// account's keys. Required.
	ControlKey ssh.Signer
	// Net is user (QEMU's user-mode networking, a loopback port forwarded
	// to the guest's SSH; no root needed) or tap (a tap device per VM on
	// Bridge, an address in Subnet, isolated by nftables; needs root;
	// the first Start makes the bridge and the rules). Empty means user.
	Net string
	// Addr (user) is the IP address the forwarded SSH ports listen on,
	// and the sandboxes report: one other machines reach when the control
	// plane is spread over several (the host's advertised address). Empty
	// means 127.0.0.1. With tap the guests' own addresses are reported;
	// other machines reach them when Subnet is routed to this host.
	Addr   string
	Bridge string       // tap: empty means froogbr0
	Subnet netip.Prefix // tap: zero means 10.213.0.0/16
	// Subnet6 (tap) is where the sandboxes' own IPv6 addresses are, each
	// at its IPv4 address's offset (the bridge takes the first, as in
	// Subnet): a public prefix routed to this host, at least as large as
	// Subnet. Their open ports are let through there (OpenPorts). Zero
	// means no IPv6.
	Subnet6 netip.Prefix
	// BootTimeout is how long a booting VM may go without progress (its
	// console advancing, or its QEMU busy) before its start fails; a boot
	// that goes on is given up to 5 × BootTimeout to answer SSH. 0 means
	// 3 minutes.
	BootTimeout time.Duration
	// QEMU and QEMUImg name the binaries; empty means qemu-system-x86_64
	// and qemu-img from PATH.
	QEMU, QEMUImg string
	Logger        *slog.Logger
}

// Driver runs sandboxes as QEMU VMs. The VMs outlive the driver (QEMU
// daemonizes): a new driver on the same folder finds them through their
// pid files and QMP sockets and adopts them.
type Driver struct {
	o     Options
	tap   *tapNet // nil: user-mode networking; set up by the first Start
	accel string
	// auto: the accelerator was chosen here, and KVM may turn out not to
	// work (a /dev/kvm that opens but cannot run this CPU).
	auto  bool
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// kvmFailed: a driver of this process tried KVM (auto) and it did not
// work. Every auto driver of the process then boots with TCG rather than
// trying again: a try is a guest that writes nothing for 10 s, with a core
// busy all the while (a test binary makes many drivers).
var kvmFailed atomic.Bool

var _ hostctl.Driver = (*Driver)(nil)
var _ hostctl.Pauser = (*Driver)(nil)
var _ hostctl.Checker = (*Driver)(nil)
var _ hostctl.KeyMaker = (*Driver)(nil)
var _ hostctl.Forker = (*Driver)(nil)
var _ hostctl.Saver = (*Driver)(nil)

// New checks the options; it starts nothing.
func New(o Options) (*Driver, error) {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("qemu: a data folder is required"))
	}
	images, err := loadImages(o.Images, o.ImageDirs)
	errs = append(errs, err)
	o.Images = images
	if (o.Kernel == "" || o.Initrd == "") && len(o.Images) == 0 {
		errs = append(errs, errors.New("qemu: a kernel and an initrd, or an OS image, are required"))
	}
	for name, img := range o.Images {
		if img.Disk == "" || img.Kernel == "" || img.Initrd == "" {
			errs = append(errs, fmt.Errorf("qemu: image %s: a disk, a kernel and an initrd are required", name))
		}
	}
	if o.ControlKey == nil {
		errs = append(errs, errors.New("qemu: the control plane's key is required"))
	}
	if o.CPUs < 0 || o.MemoryMB < 0 {
		errs = append(errs, fmt.Errorf("qemu: %d vCPUs and %d MB for every size: want 0 (each size's own) or more", o.CPUs, o.MemoryMB))
	}
	if o.QEMU == "" {
		o.QEMU = "qemu-system-x86_64"
	}
	if o.QEMUImg == "" {
		o.QEMUImg = "qemu-img"
	}
	for _, bin := range []string{o.QEMU, o.QEMUImg} {
		if _, err := exec.LookPath(bin); err != nil {
			errs = append(errs, fmt.Errorf("qemu: %s: %w (deploy/testdeps.sh installs it)", bin, err))
		}
	}
	accel, auto := o.Accel, false
	switch accel {
	case "", "auto":
		accel, auto = "tcg", true
		if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil {
			f.Close()
			accel = "kvm"
		}
	case "kvm", "tcg":
	default:
		errs = append(errs, fmt.Errorf("qemu: accel %q: want auto, kvm or tcg", o.Accel))
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1"
	}
	if ip := net.ParseIP(o.Addr); ip == nil || ip.To4() == nil || ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("qemu: address %q: want one IPv4 address of this host (QEMU's port forwards take IPv4)", o.Addr))
	}
	switch o.Net {
	case "", "user", "tap":
	default:
		errs = append(errs, fmt.Errorf("qemu: net %q: want user or tap", o.Net))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var tap *tapNet
	if o.Net == "tap" {
		if o.Bridge == "" {
			o.Bridge = "froogbr0"
		}
		if !o.Subnet.IsValid() {
			o.Subnet = netip.MustParsePrefix("10.213.0.0/16")
		}
		var err error
		if tap, err = newTapNet(o.Bridge, o.Subnet, o.Subnet6); err != nil {
			return nil, err
		}
	}
	// Absolute: the overlays name their backing disk by this path.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	if tap != nil {
		tap.sandboxes = filepath.Join(dir, "sandboxes")
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 3 * time.Minute
	}
	if o.DiskSize == 0 {
		o.DiskSize = 10 << 30
	}
	o.Sizes = sizes(o.Sizes, o.CPUs, o.MemoryMB)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{o: o, tap: tap, accel: accel, auto: auto, locks: map[string]*sync.Mutex{}}, nil
}

// sizes is the size table of the options: theirs or DefaultSizes, with
// cpus and memoryMB, when above 0, in every size. A new map: DefaultSizes
// stays as it is.
func sizes(table map[string]Size, cpus, memoryMB int) map[string]Size {
	if table == nil {
		table = DefaultSizes
	}
	out := make(map[string]Size, len(table))
	for name, sz := range table {
		if cpus > 0 {
			sz.CPUs = cpus
		}
		if memoryMB > 0 {
			sz.MemoryMB = memoryMB
		}
		out[name] = sz
	}
	return out
}

// Accel is the accelerator the VMs use.
func (d *Driver) Accel() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.auto && d.accel == "kvm" && kvmFailed.Load() {
		d.accel = "tcg"
	}
	return d.accel
}

func (d *Driver) lock(id string) func() {
	d.mu.Lock()
	l := d.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		d.locks[id] = l
	}
	d.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (d *Driver) dir(id string) string { return filepath.Join(d.o.Dir, "sandboxes", id) }

func (d *Driver) file(id, name string) string { return filepath.Join(d.dir(id), name) }

// size is the sandbox's share of the host.
func (d *Driver) size(sb *store.Sandbox) (Size, error) {
	size, ok := d.o.Sizes[sb.Size]
	if !ok {
		size, ok = d.o.Sizes["default"]
		if !ok {
			return Size{}, fmt.Errorf("qemu: no size %q", sb.Size)
		}
	}
	return size, nil
}
