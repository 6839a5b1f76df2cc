package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/sshkey"
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
	Net    string
	Bridge string       // tap: empty means froogbr0
	Subnet netip.Prefix // tap: zero means 10.213.0.0/16
	// BootTimeout is how long a VM has to answer SSH once QEMU runs; 0
	// means 3 minutes.
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
		if tap, err = newTapNet(o.Bridge, o.Subnet); err != nil {
			return nil, err
		}
	}
	// Absolute: the overlays name their backing disk by this path.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
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

// loadImages is images with the images in dirs loaded (LoadImage), a new
// map.
func loadImages(images map[string]Image, dirs map[string]string) (map[string]Image, error) {
	if len(dirs) == 0 {
		return images, nil
	}
	var errs []error
	out := make(map[string]Image, len(images)+len(dirs))
	for name, img := range images {
		out[name] = img
	}
	for name, dir := range dirs {
		if _, ok := out[name]; ok {
			errs = append(errs, fmt.Errorf("qemu: image %s: given twice", name))
			continue
		}
		img, err := LoadImage(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[name] = img
	}
	return out, errors.Join(errs...)
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

// Start boots the sandbox from its disk, restores it when its memory was
// saved, resumes it when it is paused, or finds it running (also one a
// previous driver started). Then it writes keys and the control key into
// the guest user's authorized_keys.
//
// Under --accel auto, KVM is on trial until a VM has booted with it: some
// hosts have a /dev/kvm whose guests start and then hang, or boot with
// broken devices. Until then, a cold boot under KVM that fails in any way
// switches the driver to TCG and boots again.
func (d *Driver) Start(ctx context.Context, sb *store.Sandbox, keys []string) (hostctl.Endpoint, error) {
	if d.tap != nil {
		// Before the KVM trial: a network that fails says nothing of KVM.
		if err := d.tap.ready(); err != nil {
			return hostctl.Endpoint{}, err
		}
	}
	defer d.lock(sb.ID)()
	keys = d.authorizedKeys(sb.ID, keys)
	ep, accel, err := d.startAndAuthorize(ctx, sb, keys)
	d.mu.Lock()
	trial := d.auto && accel == "kvm" && ctx.Err() == nil // a start cut short says nothing of KVM
	if trial && err == nil {
		d.auto = false // KVM works here
	}
	if trial && err != nil {
		d.accel = "tcg"
	}
	d.mu.Unlock()
	if trial && err != nil {
		d.o.Logger.Warn("qemu: KVM does not work here, using TCG", slog.String("error", err.Error()))
		if err := d.kill(sb.ID); err != nil {
			return hostctl.Endpoint{}, err
		}
		ep, _, err = d.startAndAuthorize(ctx, sb, keys)
	}
	return ep, err
}

// startAndAuthorize starts the VM and writes its authorized keys; accel
// is the accelerator of a cold boot ("" when there was none).
func (d *Driver) startAndAuthorize(ctx context.Context, sb *store.Sandbox, keys []string) (hostctl.Endpoint, string, error) {
	ep, accel, err := d.start(ctx, sb, keys)
	if err == nil {
		if err = d.authorize(ctx, ep, keys); err != nil {
			err = fmt.Errorf("qemu: writing the authorized keys of %s: %w", sb.ID, err)
		}
	}
	return ep, accel, err
}

func (d *Driver) start(ctx context.Context, sb *store.Sandbox, keys []string) (hostctl.Endpoint, string, error) {
	if vm := d.attach(sb.ID); vm != nil {
		defer vm.close()
		st, err := vm.status(ctx)
		if err != nil {
			return hostctl.Endpoint{}, "", err
		}
		if st == "paused" {
			if err := vm.run(ctx, "cont", nil, nil); err != nil {
				return hostctl.Endpoint{}, "", err
			}
		}
		if st == "running" || st == "paused" {
			ep, err := d.endpoint(ctx, sb.ID)
			return ep, "", err
		}
	}
	// Shut down or crashed inside, or a QEMU whose monitor does not
	// answer: boot again from the disk.
	if err := d.kill(sb.ID); err != nil {
		return hostctl.Endpoint{}, "", err
	}
	if err := d.prepare(sb); err != nil {
		return hostctl.Endpoint{}, "", err
	}
	if ep, ok := d.restore(ctx, sb); ok {
		return ep, "", nil
	}
	if err := d.writeSeed(sb, keys); err != nil {
		return hostctl.Endpoint{}, "", err
	}
	accel := d.Accel()
	if err := d.boot(ctx, sb, accel, false); err != nil {
		return hostctl.Endpoint{}, accel, err
	}
	ep, err := d.endpoint(ctx, sb.ID)
	return ep, accel, err
}

// prepare makes the sandbox's folder: its host key (once) and its disk
// (an overlay on the base disk, once).
func (d *Driver) prepare(sb *store.Sandbox) error {
	if err := os.MkdirAll(d.dir(sb.ID), 0o700); err != nil {
		return err
	}
	if _, _, err := d.hostKey(sb.ID); err != nil {
		return err
	}
	if _, err := os.Stat(d.file(sb.ID, "disk.qcow2")); errors.Is(err, os.ErrNotExist) {
		img, err := d.image(sb)
		if err != nil {
			return err
		}
		base, size := img.Disk, int64(0)
		if base == "" {
			base, err = d.baseDisk()
		} else {
			size, err = d.diskSize(base) // an OS disk grows to DiskSize; cloud-init resizes its file system
		}
		if err != nil {
			return err
		}
		args := []string{"create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, d.file(sb.ID, "disk.qcow2")}
		if size < d.o.DiskSize && img.Disk != "" {
			args = append(args, strconv.FormatInt(d.o.DiskSize, 10))
		}
		if out, err := exec.Command(d.o.QEMUImg, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("qemu-img create: %v: %s", err, out)
		}
	}
	return nil
}

// writeSeed writes the seed of the next cold boot: the host key, the keys
// that may log in, the name and the network.
func (d *Driver) writeSeed(sb *store.Sandbox, keys []string) error {
	keyPEM, pub, err := d.hostKey(sb.ID)
	if err != nil {
		return err
	}
	seed := Seed{InstanceID: sb.ID, Hostname: sb.Name, HostKeyPEM: keyPEM, HostKeyPublic: pub, AuthorizedKeys: keys,
		Address: "10.0.2.15/24", Gateway: "10.0.2.2", DNS: "10.0.2.3"} // QEMU's user-mode network
	if d.tap != nil {
		addr, err := d.tap.address(filepath.Join(d.o.Dir, "sandboxes"), sb.ID)
		if err != nil {
			return err
		}
		seed.Address = netip.PrefixFrom(addr, d.tap.subnet.Bits()).String()
		seed.Gateway, seed.DNS = d.tap.host.String(), d.tap.host.String()
	}
	return os.WriteFile(d.file(sb.ID, "seed.iso"), seed.ISO(time.Now()), 0o600)
}

// Image is an OS: a qcow2 base disk with cloud-init, booted with its
// kernel and initrd.
type Image struct {
	Disk, Kernel, Initrd string
	Cmdline              string // the kernel's command line
}

// LoadImage reads the image in dir, as deploy/images/build.sh makes it:
// disk.qcow2, vmlinuz, initrd.img and cmdline.
func LoadImage(dir string) (Image, error) {
	dir, err := filepath.Abs(dir) // overlays name their base disk by path
	if err != nil {
		return Image{}, err
	}
	img := Image{Disk: filepath.Join(dir, "disk.qcow2"), Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
	for _, f := range []string{img.Disk, img.Kernel, img.Initrd} {
		if _, err := os.Stat(f); err != nil {
			return Image{}, fmt.Errorf("qemu: image %s: %w", dir, err)
		}
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return Image{}, fmt.Errorf("qemu: image %s: %w", dir, err)
	}
	img.Cmdline = strings.TrimSpace(string(cmdline))
	return img, nil
}

// image is what the sandbox boots: its OS's image, or the test image.
func (d *Driver) image(sb *store.Sandbox) (Image, error) {
	if img, ok := d.o.Images[sb.OS]; ok {
		return img, nil
	}
	if d.o.Kernel == "" {
		return Image{}, fmt.Errorf("qemu: this host has no image for os %q", sb.OS)
	}
	return Image{Kernel: d.o.Kernel, Initrd: d.o.Initrd, Cmdline: "console=ttyS0 panic=-1"}, nil
}

// HostKey makes the sandbox's SSH host key (once) and returns its public
// half: hostctl pins it in the store before the guest ever boots.
func (d *Driver) HostKey(ctx context.Context, sb *store.Sandbox) (string, error) {
	defer d.lock(sb.ID)()
	if err := os.MkdirAll(d.dir(sb.ID), 0o700); err != nil {
		return "", err
	}
	_, pub, err := d.hostKey(sb.ID)
	return pub, err
}

// hostKey returns the sandbox's SSH host key (OpenSSH PEM), made on first
// use, and its public half.
func (d *Driver) hostKey(id string) (string, string, error) {
	s, pemBytes, err := sshkey.LoadOrCreate(d.file(id, "host_key"), "")
	if err != nil {
		return "", "", fmt.Errorf("qemu: host key of %s: %w", id, err)
	}
	return string(pemBytes), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))), nil
}

// diskSize is a disk's virtual size.
func (d *Driver) diskSize(path string) (int64, error) {
	out, err := exec.Command(d.o.QEMUImg, "info", "--output=json", path).Output()
	if err != nil {
		return 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.VirtualSize <= 0 {
		return 0, fmt.Errorf("qemu-img info %s: no virtual size (%v)", path, err)
	}
	return info.VirtualSize, nil
}

// baseDisk is the empty disk every test-image sandbox's overlay starts
// from.
func (d *Driver) baseDisk() (string, error) {
	path := filepath.Join(d.o.Dir, "base", fmt.Sprintf("tinyvm-%d.qcow2", d.o.DiskSize))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tmp := path + ".new"
	if out, err := exec.Command(d.o.QEMUImg, "create", "-q", "-f", "qcow2", tmp, strconv.FormatInt(d.o.DiskSize, 10)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	return path, os.Rename(tmp, path)
}

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

// boot starts QEMU for the sandbox with accel; QEMU daemonizes once the VM
// is set up. incoming: the VM waits for its memory (migrate-incoming)
// instead of booting.
func (d *Driver) boot(ctx context.Context, sb *store.Sandbox, accel string, incoming bool) error {
	size, err := d.size(sb)
	if err != nil {
		return err
	}
	img, err := d.image(sb)
	if err != nil {
		return err
	}
	netdev, port := "", 22
	if d.tap != nil {
		tap, err := d.tap.plug(sb.ID)
		if err != nil {
			return err
		}
		netdev = "tap,id=net0,ifname=" + tap + ",script=no,downscript=no"
	} else {
		p, err := freePort()
		if err != nil {
			return err
		}
		port = p
		netdev = fmt.Sprintf("user,id=net0,hostfwd=tcp:127.0.0.1:%d-:22", port)
	}
	if err := os.WriteFile(d.file(sb.ID, "ssh_port"), []byte(strconv.Itoa(port)), 0o600); err != nil {
		return err
	}
	os.Remove(d.file(sb.ID, "qmp.sock"))
	if !incoming {
		os.Remove(d.file(sb.ID, "console.log")) // a new boot, a new console
	}
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	args := []string{
		"-name", "froog-" + sb.ID,
		"-machine", "q35,accel=" + accel, "-cpu", cpu,
		"-smp", strconv.Itoa(size.CPUs), "-m", strconv.Itoa(size.MemoryMB),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		// Appended to: a restored VM's console goes on where it was.
		"-chardev", "file,id=console,append=on,path=" + d.file(sb.ID, "console.log"), "-serial", "chardev:console",
		"-kernel", img.Kernel, "-initrd", img.Initrd, "-append", img.Cmdline,
		"-drive", "file=" + d.file(sb.ID, "disk.qcow2") + ",if=virtio,format=qcow2,cache=writeback",
		"-drive", "file=" + d.file(sb.ID, "seed.iso") + ",if=virtio,format=raw,readonly=on",
		"-netdev", netdev,
		"-device", "virtio-net-pci,netdev=net0,mac=" + macAddress(sb.ID),
		"-device", "virtio-rng-pci",
		"-qmp", "unix:" + d.file(sb.ID, "qmp.sock") + ",server=on,wait=off",
		"-pidfile", d.file(sb.ID, "qemu.pid"),
		"-daemonize",
	}
	if incoming {
		args = append(args, "-incoming", "defer")
	}
	cmd := exec.CommandContext(ctx, d.o.QEMU, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("qemu: starting %s: %v: %s", sb.ID, err, strings.TrimSpace(out.String()))
	}
	if d.auto && accel == "kvm" && !incoming {
		if err := d.kvmProgress(ctx, sb.ID); err != nil {
			return err
		}
	}
	d.o.Logger.Info("qemu: booted", slog.String("sandbox", sb.ID), slog.String("accel", accel), slog.Int("ssh_port", port))
	return nil
}

// kvmProgress checks a guest that KVM was chosen for without being asked:
// some hosts have a /dev/kvm whose guests start and then never run (a
// nested host without the CPU features). Under KVM the kernel writes to
// the console within a second; a console still empty after 10 seconds
// means KVM does not work here, and the VM is ended.
func (d *Driver) kvmProgress(ctx context.Context, id string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if fi, err := os.Stat(d.file(id, "console.log")); err == nil && fi.Size() > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := d.kill(id); err != nil {
		return err
	}
	return errors.New("qemu: a KVM guest wrote nothing to its console in 10 s")
}

// endpoint waits until the guest's SSH server answers and returns where
// it is, with the pinned key.
func (d *Driver) endpoint(ctx context.Context, id string) (hostctl.Endpoint, error) {
	ep, err := d.address(id)
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	addr := net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
	for deadline := time.Now().Add(d.o.BootTimeout); ; {
		if sshAnswers(addr) {
			return ep, nil
		}
		if !d.alive(id) {
			return hostctl.Endpoint{}, fmt.Errorf("qemu: %s exited while booting: %s", id, d.consoleTail(id))
		}
		if time.Now().After(deadline) {
			return hostctl.Endpoint{}, fmt.Errorf("qemu: %s's SSH server did not answer within %v; last console lines: %s", id, d.o.BootTimeout, d.consoleTail(id))
		}
		select {
		case <-ctx.Done():
			return hostctl.Endpoint{}, fmt.Errorf("qemu: waiting for %s's SSH server: %w", id, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// address is where the VM's SSH server listens, with its host key.
func (d *Driver) address(id string) (hostctl.Endpoint, error) {
	b, err := os.ReadFile(d.file(id, "ssh_port"))
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	port, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	_, pub, err := d.hostKey(id)
	if err != nil {
		return hostctl.Endpoint{}, err
	}
	host := "127.0.0.1"
	if d.tap != nil {
		a, err := os.ReadFile(d.file(id, "address"))
		if err != nil {
			return hostctl.Endpoint{}, err
		}
		host = strings.TrimSpace(string(a))
	}
	return hostctl.Endpoint{Host: host, Port: port, HostKey: pub}, nil
}

// sshAnswers reports whether an SSH server greets on addr (user-mode
// networking accepts the TCP connection before the guest listens).
func sshAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	b := make([]byte, 4)
	n, _ := c.Read(b)
	return n == 4 && string(b) == "SSH-"
}

// consoleTail is the console's last whole lines, up to 400 bytes.
func (d *Driver) consoleTail(id string) string {
	b, _ := os.ReadFile(d.file(id, "console.log"))
	b = bytes.TrimRight(b, "\r\n")
	if len(b) > 400 {
		b = b[len(b)-400:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}

// Check reports a VM that is gone (its QEMU died on its own) or that its
// guest shut down or crashed, with what the console said last.
func (d *Driver) Check(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	if !d.alive(sb.ID) {
		return fmt.Errorf("the VM's QEMU process exited; last console lines: %s", d.consoleTail(sb.ID))
	}
	vm := d.attach(sb.ID)
	if vm == nil {
		return errors.New("the VM's monitor does not answer")
	}
	defer vm.close()
	st, err := vm.status(ctx)
	if err != nil {
		return err
	}
	switch st {
	case "running", "paused":
		return nil
	}
	return fmt.Errorf("the VM is %s; last console lines: %s", st, d.consoleTail(sb.ID))
}

// Fork copies src's disk to dst, which has none yet: a running source is
// paused for the copy (QMP stop, then cont), so the copy is consistent.
// Only the overlay is copied; both share the base disk. dst gets its own
// host key at its first start.
func (d *Driver) Fork(ctx context.Context, src, dst *store.Sandbox) error {
	if src.ID == dst.ID {
		return errors.New("qemu: a sandbox cannot fork itself")
	}
	unlockDst := d.lock(dst.ID)
	defer unlockDst()
	target := d.file(dst.ID, "disk.qcow2")
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	defer d.lock(src.ID)()
	if _, err := os.Stat(d.file(src.ID, "disk.qcow2")); err != nil {
		return fmt.Errorf("qemu: the disk to fork: %w", err)
	}
	if vm := d.attach(src.ID); vm != nil {
		st, err := vm.status(ctx)
		vm.close() // QMP takes one client at a time: pause attaches again
		if err != nil {
			return err
		}
		if st == "running" {
			if err := d.pause(ctx, src.ID); err != nil {
				return err
			}
			defer func() {
				if vm := d.attach(src.ID); vm != nil {
					vm.run(context.WithoutCancel(ctx), "cont", nil, nil)
					vm.close()
				}
			}()
		}
	}
	if err := os.MkdirAll(d.dir(dst.ID), 0o700); err != nil {
		return err
	}
	tmp := target + ".new"
	if out, err := exec.CommandContext(ctx, "cp", "--sparse=always", d.file(src.ID, "disk.qcow2"), tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("qemu: copying the disk: %v: %s", err, out)
	}
	return os.Rename(tmp, target)
}

// Pause freezes the VM (QMP stop): every process keeps its state, and a
// Start within the warm window resumes it in about a second.
func (d *Driver) Pause(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	return d.pause(ctx, sb.ID)
}

// pause syncs a running guest's disk and freezes the VM.
func (d *Driver) pause(ctx context.Context, id string) error {
	vm := d.attach(id)
	if vm == nil {
		return nil
	}
	defer vm.close()
	st, err := vm.status(ctx)
	if err != nil || st != "running" {
		return err
	}
	d.syncGuest(ctx, id)
	return vm.run(ctx, "stop", nil, nil)
}

// Stop ends the VM and forgets its saved memory; its disk stays for the
// next Start, which boots from it.
func (d *Driver) Stop(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	d.forgetMemory(sb.ID)
	if err := d.pause(ctx, sb.ID); err != nil { // a running guest syncs its disk first
		d.o.Logger.Warn("qemu: pausing before the stop", slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
	}
	return d.stopLocked(ctx, sb.ID)
}

func (d *Driver) stopLocked(ctx context.Context, id string) error {
	if vm := d.attach(id); vm != nil {
		// quit ends QEMU after flushing what it holds of the disk.
		err := vm.run(ctx, "quit", nil, nil)
		vm.close()
		for deadline := time.Now().Add(10 * time.Second); d.alive(id) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && !d.alive(id) && !strings.Contains(err.Error(), "closed") {
			d.o.Logger.Warn("qemu: quit", slog.String("sandbox", id), slog.String("error", err.Error()))
		}
	}
	if err := d.kill(id); err != nil { // one that did not quit, or whose monitor does not answer
		return err
	}
	os.Remove(d.file(id, "qmp.sock"))
	if d.tap != nil {
		d.tap.unplug(id)
	}
	return nil
}

// Delete ends the VM and removes its folder.
func (d *Driver) Delete(ctx context.Context, sb *store.Sandbox) error {
	defer d.lock(sb.ID)()
	d.stopLocked(ctx, sb.ID)
	return os.RemoveAll(d.dir(sb.ID))
}

// pid is the VM's QEMU process, from its pid file; 0 if none.
func (d *Driver) pid(id string) int {
	b, err := os.ReadFile(d.file(id, "qemu.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// alive reports whether the VM's QEMU process runs (and is QEMU: a pid
// may be reused after a reboot of the host).
func (d *Driver) alive(id string) bool {
	pid := d.pid(id)
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	// A QEMU that died but is not reaped yet (daemonized, its parent is
	// init) is a zombie: dead.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil || bytes.Contains(status, []byte("\nState:\tZ")) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte("froog-"+id))
}

// kill ends the VM's QEMU process, if it runs, and waits until it is gone
// and its disk's lock with it: a process busy in the kernel can take
// seconds to exit after SIGKILL, and a new QEMU could not open the disk.
func (d *Driver) kill(id string) error {
	if pid := d.pid(id); pid > 0 && d.alive(id) {
		syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(30 * time.Second); d.alive(id); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("qemu: the QEMU of %s (pid %d) does not exit after SIGKILL", id, pid)
			}
		}
	}
	os.Remove(d.file(id, "qemu.pid"))
	return nil
}

// attach connects to a running VM's monitor, or returns nil.
func (d *Driver) attach(id string) *monitor {
	if !d.alive(id) {
		return nil
	}
	m, err := dialMonitor(d.file(id, "qmp.sock"), 2*time.Second)
	if err != nil {
		d.o.Logger.Warn("qemu: monitor", slog.String("sandbox", id), slog.String("error", err.Error()))
		return nil
	}
	return m
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
