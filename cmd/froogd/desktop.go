package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"froog.tech/froog/guest"
	"froog.tech/froog/guest/seed"
)

// asGuest runs the guest's programs when froogd is called by their names:
// froog-desktop (the OS image's /usr/local/bin/froog-desktop, the local
// driver's symlink) and froog-init (the OS image's, at boot). It reports
// whether it did, and the exit status.
func asGuest(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, bool) {
	if len(argv) == 0 {
		return 0, false
	}
	switch filepath.Base(argv[0]) {
	case guest.Name:
		return guest.Main(ctx, argv[1:], stdout, stderr), true
	case seed.Name:
		return seed.Main(argv[1:], stdout, stderr), true
	}
	return 0, false
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
