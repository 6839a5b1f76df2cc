package seed

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// mountAt is where froog-init mounts the seed while it reads it.
const mountAt = "/run/froog-seed"

// Main is froog-init: it finds the seed among the virtio disks, applies
// it to this system and says what it did on stdout (the console, under
// its systemd unit). Exit status 1 on any failure: the unit fails, and
// the boot goes on without the seed's user, so hostctl's boot never
// answers and names the failure.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "usage: %s (no arguments: run at boot by froog-init.service)\n", Name)
		return 2
	}
	began := time.Now()
	s, err := mountAndRead()
	if err == nil {
		err = Apply("/", s, rootDevice(), host{})
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s (instance %s) from its seed in %.1f s\n", Name, s.Hostname, s.InstanceID, time.Since(began).Seconds())
	return 0
}

// mountAndRead mounts each virtio disk but the root's as ISO 9660 until
// one holds meta-data, reads the seed from it, and unmounts it.
func mountAndRead() (Seed, error) {
	if err := os.MkdirAll(mountAt, 0o700); err != nil {
		return Seed{}, err
	}
	root := rootDevice()
	disks, _ := filepath.Glob("/dev/vd[a-z]")
	for _, d := range disks {
		if d == root || unix.Mount(d, mountAt, "iso9660", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "") != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(mountAt, "meta-data")); err != nil {
			unix.Unmount(mountAt, 0)
			continue
		}
		s, err := Read(os.DirFS(mountAt))
		unix.Unmount(mountAt, 0)
		return s, err
	}
	return Seed{}, fmt.Errorf("no seed (an ISO 9660 disk with meta-data) among %v", disks)
}

// rootDevice is the device mounted at /, as /proc/self/mounts names it;
// empty where that is not a device node here (/dev/root).
func rootDevice() string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return ""
	}
	defer f.Close()
	dev := ""
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[1] == "/" && strings.HasPrefix(fields[0], "/dev/") {
			dev = fields[0] // the last mount at / is the one in use
		}
	}
	if st, err := os.Stat(dev); err != nil || st.Mode()&os.ModeDevice == 0 {
		return ""
	}
	return dev
}

func setHostname(name string) error { return unix.Sethostname([]byte(name)) }
