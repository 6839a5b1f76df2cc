// Package local is the development driver of hostctl: a sandbox is a
// folder under the data folder plus an in-process SSH server on
// 127.0.0.1:0 (or Options.Addr, the host's advertised address) with a
// host key of its own.
//
// It is NOT an isolation boundary. Commands run as the user that runs
// froogd, on the host's network and file system; the folder is only their
// home. It exists so that `make run` gives a working froog in a second,
// and so that tests can run sandboxes without VMs.
//
// The SSH server accepts only the control plane's key, serves exec
// sessions (sh -c in the sandbox's home, env, stdin, exit status, signals;
// closing the channel kills the command's process group) and direct-tcpip
// to loopback destinations only. Sandboxes share the host's ports: a port
// another sandbox's process holds is refused, and left out of the API's
// port probe (ports.go), so that no sandbox's wait or URL answers with
// another's app. Every process it starts carries
// FROOG_SANDBOX_ID in its environment, which is how Stop and Pause find
// them all, including ones that left their process group.
//
// The files: local.go (the Driver: Start, Stop, Pause, Delete, the
// folders), sshd.go (one sandbox's SSH server: exec sessions and
// direct-tcpip), sftp.go (its sftp subsystem, confined to the home
// folder), ports.go (which ports a sandbox's own processes listen on),
// diag.go (the host's listening sockets, from the kernel's socket
// diagnostics) and snapshots.go (snapshots as copies of the home folder).
//
// Each sandbox's commands have froog-desktop on their PATH (a folder of
// the driver's with a symlink to froogd, Options.DesktopExe), so the
// desktop and the browser view run here as in the OS image: Xvnc and the
// rest on the host, as the host's user, on a display and port that
// froog-desktop finds free at start (so sandboxes never clash). A stop of
// the sandbox kills its desktops' process groups with everything else.
package local
