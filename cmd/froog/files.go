package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// maxPush is the archive route's limit on what it receives, compressed.
const maxPush = 100 << 20

// skipDirs are left out of a push outside git: build outputs and caches.
var skipDirs = map[string]bool{".git": true, "node_modules": true, "target": true, ".venv": true, "venv": true,
	"dist": true, "build": true, "__pycache__": true, ".cache": true, ".next": true}

func (a *app) pushCmd() *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "push NAME [FOLDER]",
		Short: "Upload a folder to the sandbox as one archive (no SSH needed)",
		Long: `Upload a folder (default: this one) to ~/FOLDER in the sandbox, as one archive
through the API. In a git repo, the tracked files and the untracked ones that
aren't ignored; elsewhere every file except .git, node_modules, target, .venv,
dist, build and the like. Up to 100 MiB compressed. Existing files with the
same names are overwritten; others stay.`,
		Example: `  froog push my-box                  # this folder to my-box:~/FOLDER
  froog push my-box ../api --to src/api`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 2 {
				dir = args[1]
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if st, err := os.Stat(abs); err != nil || !st.IsDir() {
				return fmt.Errorf("%s is not a folder", dir)
			}
			if to == "" {
				to = filepath.Base(abs)
			}
			files, err := pushList(abs)
			if err != nil {
				return err
			}
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(writeArchive(pw, abs, files)) }()
			u, err := h.Unpack(cmd.Context(), to, pr)
			pr.CloseWithError(errors.New("the upload ended"))
			if err != nil {
				return err
			}
			return a.print(u, func(w io.Writer) {
				fmt.Fprintf(w, "%d files to %s:%s\n", u.Files, args[0], u.Path)
			})
		},
	}
	c.Flags().StringVar(&to, "to", "", "the folder in the sandbox (relative to ~; default the folder's name)")
	return c
}

// pushList is what a push of dir sends, as slash paths relative to it.
func pushList(dir string) ([]string, error) {
	if out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f == "" {
				continue
			}
			// A tracked file deleted in the work tree is not sent.
			if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f))); err == nil {
				files = append(files, f)
			}
		}
		return files, nil
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && p != dir && skipDirs[e.Name()] {
			return filepath.SkipDir
		}
		if !e.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// writeArchive writes files of dir as a .tar.gz to w, failing past maxPush.
func writeArchive(w io.Writer, dir string, files []string) error {
	lw := &limitWriter{w: w, left: maxPush}
	gz := gzip.NewWriter(lw)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		link := ""
		if st.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(st, link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = path.Clean(f), "", "", 0, 0
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if st.Mode().IsRegular() {
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, in)
			in.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errors.New("the archive is over 100 MiB compressed")
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// remote splits NAME:PATH; ok is false for a local path.
func remote(arg string) (name, p string, ok bool) {
	name, p, ok = strings.Cut(arg, ":")
	if !ok || name == "" || strings.ContainsAny(name, `/\`) {
		return "", "", false
	}
	return name, p, true
}

func (a *app) scpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "scp SOURCE TARGET",
		Short: "Copy a file to or from a sandbox, through the files API",
		Long: `Copy one file between this computer and a sandbox: one side is NAME:PATH
(relative to ~, or absolute). A target that is a folder (or ends in /) gets
the source's name. Up to 100 MiB.`,
		Example: `  froog scp my-box:demo.mp4 .
  froog scp ./wallpaper.png my-box:.config/froog/wallpaper.png`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcName, srcPath, srcRemote := remote(args[0])
			dstName, dstPath, dstRemote := remote(args[1])
			ctx := cmd.Context()
			switch {
			case srcRemote == dstRemote:
				return errors.New("one of SOURCE and TARGET is NAME:PATH, the other a local path")
			case dstRemote:
				in, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer in.Close()
				st, err := in.Stat()
				if err != nil || st.IsDir() {
					return fmt.Errorf("%s is not a file (scp copies one file; froog push copies a folder)", args[0])
				}
				if dstPath == "" || strings.HasSuffix(dstPath, "/") {
					dstPath += filepath.Base(args[0])
				}
				h, err := a.sandbox(dstName)
				if err != nil {
					return err
				}
				if err := h.WriteFile(ctx, dstPath, in, fmt.Sprintf("%o", st.Mode().Perm())); err != nil {
					return err
				}
				return a.print(map[string]any{"to": dstName + ":" + dstPath, "bytes": st.Size()}, nil)
			default:
				h, err := a.sandbox(srcName)
				if err != nil {
					return err
				}
				dst := args[1]
				if st, err := os.Stat(dst); (err == nil && st.IsDir()) || strings.HasSuffix(dst, string(filepath.Separator)) {
					dst = filepath.Join(dst, path.Base(srcPath))
				}
				r, err := h.ReadFile(ctx, srcPath)
				if err != nil {
					return err
				}
				defer r.Close()
				tmp, err := os.CreateTemp(filepath.Dir(dst), ".froog-scp-*")
				if err != nil {
					return err
				}
				defer os.Remove(tmp.Name())
				n, err := io.Copy(tmp, r)
				if cerr := tmp.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return fmt.Errorf("copy %s: %w", args[0], err)
				}
				if err := os.Rename(tmp.Name(), dst); err != nil {
					return err
				}
				return a.print(map[string]any{"to": dst, "bytes": n}, nil)
			}
		},
	}
}

func (a *app) sshCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ssh NAME [-- COMMAND…]",
		Short: "Open a shell in the sandbox over SSH (or run a command)",
		Long: `Connect with ssh to the sandbox, checking its host key against the one the API
gives, recorded in froog's own known-hosts file (~/.config/froog/known_hosts).
Your key must be on the account (froog's SSH keys API).`,
		Example: `  froog ssh my-box
  froog ssh my-box -- true   # records the address in froog's known-hosts file`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 && cmd.ArgsLenAtDash() != 1 {
				return errors.New("give the command after --: froog ssh NAME -- COMMAND")
			}
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			info, err := h.SSH(cmd.Context())
			if err != nil {
				return err
			}
			known, err := recordHostKey(info.KnownHosts)
			if err != nil {
				return err
			}
			sshArgs := []string{"-o", "UserKnownHostsFile=" + known, "-o", "StrictHostKeyChecking=yes",
				"-p", fmt.Sprint(info.Port), info.User + "@" + info.Host}
			if len(args) > 1 {
				sshArgs = append(sshArgs, "--", strings.Join(args[1:], " "))
			}
			c := exec.CommandContext(cmd.Context(), "ssh", sshArgs...)
			c.Stdin, c.Stdout, c.Stderr = a.stdin, a.stdout, a.stderr
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return exitCode(ee.ExitCode())
			}
			return err
		},
	}
}

// recordHostKey puts line (a known_hosts line) in froog's known-hosts file,
// replacing any line for the same host, and returns the file's path.
func recordHostKey(line string) (string, error) {
	cfg, err := configPath()
	if err != nil {
		return "", err
	}
	path := filepath.Join(filepath.Dir(cfg), "known_hosts")
	host, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	if host == "" {
		return "", errors.New("the API gave no host key")
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var keep []string
	for _, l := range strings.Split(string(old), "\n") {
		if h, _, _ := strings.Cut(l, " "); l != "" && h != host {
			keep = append(keep, l)
		}
	}
	keep = append(keep, strings.TrimSpace(line))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o600)
}
