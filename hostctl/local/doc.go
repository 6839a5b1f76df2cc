// Package local is the development driver of hostctl: a sandbox is a
// folder under the data folder plus an in-process SSH server on
// 127.0.0.1:0 with a host key of its own.
//
// It is NOT an isolation boundary. Commands run as the user that runs
// froogd, on the host's network and file system; the folder is only their
// home. It exists so that `make run` gives a working froog in a second,
// and so that tests can run sandboxes without VMs.
//
// The SSH server accepts only the control plane's key, serves exec
// sessions (sh -c in the sandbox's home, env, stdin, exit status, signals;
// closing the channel kills the command's process group) and direct-tcpip
// to loopback destinations only. Every process it starts carries
// FROOG_SANDBOX_ID in its environment, which is how Stop and Pause find
// them all, including ones that left their process group.
package local
