// Package guest runs a sandbox's desktop from inside the sandbox:
// the froog-desktop program (froogd desktop, or froogd run under the name
// froog-desktop). Its start, status and stop manage one X display per
// kind with a VNC server on it:
//
//   - desktop: a 1920x1080 screen with a window manager (XFCE's xfwm4 and
//     panel in the OS image, openbox where XFCE is missing, e.g. on a
//     development host with the local driver, or none) whose background
//     follows ~/.config/froog/wallpaper.png; with --browser, a desktop
//     it starts also opens a Chromium window (its default profile, once);
//   - browser: a screen of its own with only Chromium on it, started again
//     when its last window closes (the browser view of issue #15).
//
// The X and VNC server is TigerVNC's Xvnc: one process that is both, so
// frames are encoded from the server's own damage tracking instead of
// being scraped from another X server (x11vnc polls), and one pid to
// watch. It listens on 127.0.0.1 only, is shared (every viewer joins the
// same screen) and has no password: the only way in from outside is the
// sandbox's SSH tunnel.
//
// start spawns a supervisor in a session of its own (the "daemon"
// command), which finds a free display and port, starts Xvnc and the rest,
// reports once the port speaks RFB, keeps the wallpaper applied, and
// ends everything it started when it is told to stop or Xvnc dies. Its
// state (pid, process group, display, port) is a JSON file per kind under
// $XDG_STATE_HOME/froog-desktop (~/.local/state/froog-desktop).
//
// Where Selkies is installed and start was given a master token on stdin
// (--selkies-token-stdin), the supervisor also runs Selkies on the screen,
// in websocket mode on 127.0.0.1 (selkies.go); start and status say which
// transport the screen offers.
//
// Where PulseAudio and ffmpeg are installed, every screen has sound
// (sound.go): a PulseAudio server of its own with a null sink, which
// what runs on the screen plays to (PULSE_SERVER), and a sound server on
// 127.0.0.1 that encodes it to Opus for each connection, only while one
// is open; start and status give its port and the PULSE_SERVER.
//
// The files: cli.go (Main: the commands and their flags), guest.go
// (Options, start, status and stop), daemon.go (the supervisor: Xvnc,
// the window manager, the browser), state.go (the kinds and the state
// files), owner.go (which process holds a port), wallpaper.go (the
// wallpaper, checked and applied), selkies.go (Selkies, above) and
// sound.go (the sound, above).
//
// It imports nothing of froog's: it runs inside sandboxes.
package guest
