package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"froog.tech/froog/store"
)

// Image is an OS: a qcow2 base disk that reads the NoCloud seed at boot
// (froog-init in froog's images, or cloud-init), booted with its
// kernel and initrd.
type Image struct {
	Disk, Kernel, Initrd string
	Cmdline              string // the kernel's command line
}

// LoadImage reads the image in dir, as deploy/images/build.sh makes it:
// disk.qcow2, vmlinux, initrd.img and cmdline. An image made before its
// kernel came uncompressed has vmlinuz in place of vmlinux.
func LoadImage(dir string) (Image, error) {
	dir, err := filepath.Abs(dir) // overlays name their base disk by path
	if err != nil {
		return Image{}, err
	}
	img := Image{Disk: filepath.Join(dir, "disk.qcow2"), Kernel: filepath.Join(dir, "vmlinux"), Initrd: filepath.Join(dir, "initrd.img")}
	if _, err := os.Stat(img.Kernel); errors.Is(err, fs.ErrNotExist) {
		img.Kernel = filepath.Join(dir, "vmlinuz")
	}
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
			size, err = d.diskSize(base) // an OS disk grows to DiskSize; its init (froog-init, cloud-init) grows its file system
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

// copyDisk copies the disk file from to the new file to, sparse, under
// another name until it is whole.
func copyDisk(ctx context.Context, from, to string) error {
	tmp := to + ".new"
	if out, err := exec.CommandContext(ctx, "cp", "--sparse=always", from, tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("qemu: copying the disk: %v: %s", err, out)
	}
	return os.Rename(tmp, to)
}
