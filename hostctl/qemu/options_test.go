package qemu

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"froog.tech/froog/internal/testkit"
)

func TestSizes(t *testing.T) {
	t.Parallel()
	before := maps.Clone(DefaultSizes)
	mine := map[string]Size{"default": {CPUs: 1, MemoryMB: 256}}
	for _, tc := range []struct {
		name           string
		table          map[string]Size
		cpus, memoryMB int
		want           map[string]Size
	}{
		{"defaults", nil, 0, 0, DefaultSizes},
		{"own table", mine, 0, 0, mine},
		{"every size 1 vCPU", nil, 1, 0, map[string]Size{"small": {1, 4096}, "default": {1, 8192}, "large": {1, 16384}}},
		{"every size 512 MB", nil, 0, 512, map[string]Size{"small": {2, 512}, "default": {4, 512}, "large": {8, 512}}},
		{"both on an own table", mine, 2, 1024, map[string]Size{"default": {2, 1024}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sizes(tc.table, tc.cpus, tc.memoryMB); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if !maps.Equal(DefaultSizes, before) {
		t.Fatalf("DefaultSizes changed: got %v, want %v", DefaultSizes, before)
	}
}

// fakeImageDir is a folder laid out as deploy/images/build.sh makes one,
// its kernel named kernel (vmlinux; vmlinuz in images made before it
// was uncompressed), with empty files: enough for LoadImage, not for a
// boot.
func fakeImageDir(t *testing.T, kernel string) string {
	dir := t.TempDir()
	for name, body := range map[string]string{"disk.qcow2": "", kernel: "", "initrd.img": "", "cmdline": "root=/dev/vda console=ttyS0\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestNewImageDirs(t *testing.T) {
	t.Parallel()
	signer := testkit.NewKey(t)
	img, old := fakeImageDir(t, "vmlinux"), fakeImageDir(t, "vmlinuz")
	d, err := New(Options{Dir: t.TempDir(), ImageDirs: map[string]string{"debian-13": img, "debian-12": old}, ControlKey: signer})
	if err != nil {
		t.Fatal(err)
	}
	got := d.o.Images["debian-13"]
	if want := (Image{Disk: filepath.Join(img, "disk.qcow2"), Kernel: filepath.Join(img, "vmlinux"), Initrd: filepath.Join(img, "initrd.img"), Cmdline: "root=/dev/vda console=ttyS0"}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if k := d.o.Images["debian-12"].Kernel; k != filepath.Join(old, "vmlinuz") {
		t.Fatalf("an image with vmlinuz, not vmlinux: kernel %s", k)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"missing folder", Options{ImageDirs: map[string]string{"debian-13": filepath.Join(img, "nothing")}}, "image " + filepath.Join(img, "nothing")},
		{"given twice", Options{Images: map[string]Image{"debian-13": got}, ImageDirs: map[string]string{"debian-13": img}}, "debian-13: given twice"},
		{"negative vCPUs", Options{Kernel: "k", Initrd: "i", CPUs: -1}, "vCPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Dir, tc.o.ControlKey = t.TempDir(), signer
			if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}
