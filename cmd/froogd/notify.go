package main

import (
	"net"
	"os"
)

// sdNotify tells systemd how the process is doing, for units of
// Type=notify (deploy/systemd): READY=1 once its listeners are up, so that
// `systemctl start` and a restart return only then, and STOPPING=1 when it
// begins to stop (an edge drains). Without NOTIFY_SOCKET it does nothing.
func sdNotify(state string) {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return
	}
	if sock[0] == '@' {
		sock = "\x00" + sock[1:] // an abstract socket
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
