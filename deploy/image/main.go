// Command image builds froog's container image for the stateless roles
// (froogd edge, froogd api) without a Docker daemon: one layer written
// here (the static froogd, Debian's CA bundle and its copyright, a
// non-root user, the state folder) on an empty base, with
// go-containerregistry, into an OCI image layout packed as one tar file.
// Reproducible: every file time is the commit's, owners are numeric, the
// entries are sorted, and the config's creation time is the commit's, so
// the same inputs give the same digest.
//
//	go run ./deploy/image -binary froogd -version V -revision R -created EPOCH -out froogd.oci.tar
//
// deploy/image.sh (make image) gives it the binary it builds.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// uid and gid of the image's user, froog: the non-root convention of
// distroless images, far from any host's system users.
const uid, gid = 65532, 65532

// options are one build's inputs: nothing else goes into the image.
type options struct {
	Binary     string    // the static froogd
	CAFile     string    // Debian's CA bundle (ca-certificates)
	CACopy     string    // its copyright file; "" leaves it out
	Version    string    // the release's version
	Revision   string    // the commit
	Created    time.Time // the commit's time: every file's and the image's
	Out        string    // the OCI layout, packed as a tar file
	Repository string    // the name the layout's index gives the image
}

func main() {
	var o options
	var created int64
	flag.StringVar(&o.Binary, "binary", "", "the static froogd to put in the image (required)")
	flag.StringVar(&o.CAFile, "ca-file", "/etc/ssl/certs/ca-certificates.crt", "Debian's CA bundle (package ca-certificates)")
	flag.StringVar(&o.CACopy, "ca-copyright", "/usr/share/doc/ca-certificates/copyright", "the CA bundle's copyright file")
	flag.StringVar(&o.Version, "version", "", "the release's version (required)")
	flag.StringVar(&o.Revision, "revision", "", "the commit (required)")
	flag.Int64Var(&created, "created", 0, "the commit's time, seconds since 1970 (required)")
	flag.StringVar(&o.Out, "out", "", "where to write the OCI layout tar (required)")
	flag.StringVar(&o.Repository, "repository", "froog.tech/froogd", "the image's name in the layout's index")
	flag.Parse()
	o.Created = time.Unix(created, 0).UTC()
	d, err := build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println(d)
}

// build writes the image's OCI layout tar to o.Out and returns the
// image's digest.
func build(o options) (v1.Hash, error) {
	var errs []error
	for name, v := range map[string]string{"-binary": o.Binary, "-ca-file": o.CAFile, "-version": o.Version, "-revision": o.Revision, "-out": o.Out} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if o.Created.Unix() <= 0 {
		errs = append(errs, errors.New("-created is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return v1.Hash{}, err
	}
	layerTar, err := rootfs(o)
	if err != nil {
		return v1.Hash{}, err
	}
	// Compressed once: without the cache the layer is gzipped again for
	// each of its digest, its size and the layout's blob.
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return v1.Hash{}, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "deploy/image: froogd, CA certificates, user froog", Comment: o.Revision}})
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, gid),
		Entrypoint: []string{"/usr/bin/froogd"},
		Cmd:        []string{"edge"},
		WorkingDir: "/var/lib/froog",
		Env:        []string{"PATH=/usr/bin:/bin", "HOME=/var/lib/froog", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		// The edge's HTTPS and HTTP, the API's, and an admin listener;
		// each only where FROOG_*_ADDR puts them.
		ExposedPorts: map[string]struct{}{"8443/tcp": {}, "8081/tcp": {}, "8080/tcp": {}, "9100/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "froogd",
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.revision": o.Revision,
			"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, err
	}
	img = mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
	}).(v1.Image)
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp("", "froog-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
		"io.containerd.image.name":          o.Repository + ":" + o.Version,
	})); err != nil {
		return v1.Hash{}, err
	}
	return digest, packDir(dir, o.Out, o.Created)
}

// entry is one file of the image's root.
type entry struct {
	name string
	mode int64
	uid  int
	body []byte // nil: a folder
}

// rootfs is the image's one layer, a tar of every file sorted by name,
// each stamped with o.Created.
func rootfs(o options) ([]byte, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("the binary: %w", err)
	}
	ca, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle: %w", err)
	}
	files := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/usr/sbin/nologin\nfroog:x:" + strconv.Itoa(uid) + ":" + strconv.Itoa(gid) + ":froog:/var/lib/froog:/usr/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nfroog:x:" + strconv.Itoa(gid) + ":\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/bin/", mode: 0o755},
		{name: "usr/bin/froogd", mode: 0o755, body: bin},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		{name: "var/lib/froog/", mode: 0o700, uid: uid},
	}
	if o.CACopy != "" {
		cp, err := os.ReadFile(o.CACopy)
		if err != nil {
			return nil, fmt.Errorf("the CA bundle's copyright: %w", err)
		}
		files = append(files, entry{name: "usr/share/", mode: 0o755}, entry{name: "usr/share/doc/", mode: 0o755},
			entry{name: "usr/share/doc/ca-certificates/", mode: 0o755}, entry{name: "usr/share/doc/ca-certificates/copyright", mode: 0o644, body: cp})
	}
	slices.SortFunc(files, func(a, b entry) int { return cmpNames(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: o.Created, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if f.body == nil {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func cmpNames(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// packDir writes dir as a tar file at out: entries sorted, owned by 0,
// stamped with at, so that the same layout packs to the same bytes.
func packDir(dir, out string, at time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: at, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
