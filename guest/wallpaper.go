package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// The limits the docs give for ~/.config/froog/wallpaper.png.
const (
	MaxWallpaperBytes  = 16 << 20
	MaxWallpaperSide   = 8192
	MaxWallpaperPixels = 16_777_216
)

// ErrWallpaper is the error of every file the desktop will not show.
var ErrWallpaper = errors.New("invalid wallpaper")

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// ValidateWallpaper says whether data is a PNG the desktop may show: at
// most 16 MiB, 8192 pixels a side and 16,777,216 pixels, and decodable to
// the end (the size is checked from the header before any pixel is
// decoded, so a small file can't make it allocate more than the limits
// allow).
func ValidateWallpaper(data []byte) error {
	if len(data) > MaxWallpaperBytes {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrWallpaper, len(data), MaxWallpaperBytes)
	}
	if !bytes.HasPrefix(data, pngMagic) {
		return fmt.Errorf("%w: not a PNG file", ErrWallpaper)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrWallpaper, err)
	}
	w, h := cfg.Width, cfg.Height
	switch {
	case w <= 0 || h <= 0:
		return fmt.Errorf("%w: %dx%d pixels", ErrWallpaper, w, h)
	case w > MaxWallpaperSide || h > MaxWallpaperSide:
		return fmt.Errorf("%w: %dx%d pixels, more than %d a side", ErrWallpaper, w, h, MaxWallpaperSide)
	case w*h > MaxWallpaperPixels:
		return fmt.Errorf("%w: %dx%d pixels, more than %d in all", ErrWallpaper, w, h, MaxWallpaperPixels)
	}
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("%w: %v", ErrWallpaper, err)
	}
	return nil
}

// wallpaper keeps the root window's background in step with the user's
// wallpaper file: checked every half second, so a change shows within
// the docs' two seconds.
type wallpaper struct {
	path string // ~/.config/froog/wallpaper.png
	copy string // what was validated, which is what is shown
	env  []string
	log  *slog.Logger

	seen   fileKey
	primed bool
	shown  bool // a wallpaper (not the plain background) is up
}

// fileKey tells one version of the file from the next.
type fileKey struct {
	exists      bool
	size, mtime int64
	ino         uint64
}

func keyOf(path string) fileKey {
	fi, err := os.Stat(path)
	if err != nil {
		return fileKey{}
	}
	k := fileKey{exists: true, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k
}

// check applies the file if it changed since the last check (and, the
// first time, whatever is there, or the plain background).
func (w *wallpaper) check(ctx context.Context) {
	k := keyOf(w.path)
	if w.primed && k == w.seen {
		return
	}
	first := !w.primed
	w.seen, w.primed = k, true
	if !k.exists {
		if first || w.shown {
			w.run(ctx, "xsetroot", "-solid", DefaultBackground)
			w.shown = false
		}
		return
	}
	data, err := readLimited(w.path)
	if err == nil {
		err = ValidateWallpaper(data)
	}
	if err != nil {
		w.log.Warn("wallpaper ignored", "path", w.path, "err", err)
		if first {
			w.run(ctx, "xsetroot", "-solid", DefaultBackground)
		}
		return
	}
	// The validated bytes are what is shown, not the file, which may have
	// changed since.
	tmp := w.copy + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		w.log.Error("wallpaper not applied", "err", err)
		return
	}
	if err := os.Rename(tmp, w.copy); err != nil {
		w.log.Error("wallpaper not applied", "err", err)
		return
	}
	// Fills the screen, keeping the aspect ratio.
	if w.run(ctx, "xwallpaper", "--zoom", w.copy) {
		w.shown = true
		w.log.Info("wallpaper applied", "path", w.path, "bytes", len(data))
	}
}

// readLimited reads at most one byte more than a wallpaper may have.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxWallpaperBytes+1))
}

func (w *wallpaper) run(ctx context.Context, name string, args ...string) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = w.env
	if out, err := cmd.CombinedOutput(); err != nil {
		w.log.Error("background not set", "program", name, "err", err, "output", strings.TrimSpace(string(out)))
		return false
	}
	return true
}
