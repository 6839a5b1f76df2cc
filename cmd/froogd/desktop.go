package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"froog.tech/froog/guest"
)

// asDesktop runs froog-desktop when froogd is called by that name (the OS
// image's /usr/local/bin/froog-desktop, the local driver's symlink): it
// reports whether it did, and the exit status.
func asDesktop(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, bool) {
	if len(argv) == 0 || filepath.Base(argv[0]) != guest.Name {
		return 0, false
	}
	return guest.Main(ctx, argv[1:], stdout, stderr), true
}

// runDesktop is froogd desktop start|status|stop.
func runDesktop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if code := guest.Main(ctx, args, stdout, stderr); code != guest.ExitOK {
		return desktopExit(code)
	}
	return nil
}

// desktopExit carries froog-desktop's exit status out of run.
type desktopExit int

func (e desktopExit) Error() string { return fmt.Sprintf("desktop: exit status %d", int(e)) }
