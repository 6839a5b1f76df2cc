package guest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

const usage = `froog-desktop: the sandbox's desktop and browser view, over VNC on 127.0.0.1.

  froog-desktop start  [--kind desktop|browser] [--profile DIR] [--browser] [--selkies-token-stdin]
  froog-desktop status [--kind desktop|browser]
  froog-desktop stop   [--kind desktop|browser]

start prints, once the VNC port speaks RFB, one line of JSON:
  {"kind":"desktop","running":true,"display":":10","vnc_port":5910,"pid":4242,"transport":"vnc"}
With --selkies-token-stdin it reads Selkies' master token from stdin and,
where Selkies is installed, runs it too (in websocket mode on 127.0.0.1)
and waits until it answers: then "transport":"selkies","selkies_port":6110.
Where PulseAudio and ffmpeg are installed the screen has sound: its answer
adds "audio_port":6210 (Opus for each connection on 127.0.0.1) and
"pulse_server":"unix:/tmp/.froog-desktop-pulse-10/native" (PULSE_SERVER,
to play on the screen from outside it; what runs on it has it already).
status prints the same, or {"kind":"desktop","running":false} (exit 3).
stop ends everything start started; stopping what is not running is fine.
Exit status: 0 done, 1 failed, 2 bad usage, 3 not running (status).
The browser view (--kind browser) is Chromium alone on a screen of its
own; --profile is its user data folder (default ~/.config/froog-browser).
--browser opens a browser window on a desktop that it starts (Chromium,
where installed, with its own default profile; once: closing it is
final).
`

// Main is the froog-desktop program (froogd desktop): args without the
// program's name. It returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "start", "status", "stop", "daemon":
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "%s: unknown command %q\n%s", Name, cmd, usage)
		return ExitUsage
	}
	fs := flag.NewFlagSet(Name+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", string(KindDesktop), "desktop or browser")
	profile := ""
	readyFD := 0
	withBrowser := false
	tokenStdin := false
	if cmd == "start" || cmd == "daemon" {
		fs.StringVar(&profile, "profile", "", "the browser view's Chromium user data folder (default ~/.config/froog-browser)")
		fs.BoolVar(&withBrowser, "browser", false, "open a browser window on the desktop when it starts")
	}
	if cmd == "start" {
		fs.BoolVar(&tokenStdin, "selkies-token-stdin", false, "read Selkies' master token from stdin, and run Selkies where it is installed")
	}
	if cmd == "daemon" {
		fs.IntVar(&readyFD, "ready-fd", 0, "where to write the state line once ready (start's pipe)")
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s %s: unexpected argument %q\n", Name, cmd, fs.Arg(0))
		return ExitUsage
	}
	k, err := ParseKind(*kind)
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", Name, cmd, err)
		return ExitUsage
	}
	home, err := os.UserHomeDir()
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", Name, cmd, err)
		return ExitFailed
	}
	o := Options{Kind: k, Home: home, StateDir: StateDir(home, os.Getenv("XDG_STATE_HOME")), Profile: profile, Browser: withBrowser}
	if tokenStdin {
		if o.SelkiesToken, err = ReadSelkiesToken(os.Stdin); err != nil {
			fmt.Fprintf(stderr, "%s %s: %v\n", Name, cmd, err)
			return ExitUsage
		}
	}

	var st State
	switch cmd {
	case "start":
		st, err = Start(ctx, o)
	case "status":
		st, err = Status(o)
	case "stop":
		st, err = Stop(o)
	case "daemon":
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer stop()
		var ready *os.File
		if readyFD > 0 {
			ready = os.NewFile(uintptr(readyFD), "ready")
		}
		log := slog.New(slog.NewTextHandler(stderr, nil))
		if err := runDaemon(ctx, o, ready, log); err != nil {
			log.Error("desktop ended", "kind", k, "err", err)
			return ExitFailed
		}
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", Name, cmd, err)
		return ExitFailed
	}
	b, _ := json.Marshal(st)
	fmt.Fprintf(stdout, "%s\n", b)
	if cmd == "status" && !st.Running {
		return ExitNotRunning
	}
	return ExitOK
}
