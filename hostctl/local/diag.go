package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// diagListening gives the listening TCP sockets of one address family
// from the kernel's socket diagnostics (netlink sock_diag), as ss does.
// Asked for listening sockets alone, the kernel walks only their table;
// /proc/net/tcp walks every connection's as well, and on a busy host
// reading it on every dial was most of the dialing process's CPU.
func diagListening(family uint8) ([]listenLine, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, diagRequest(family), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var lines []listenLine
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		more, done, err := parseDiag(buf[:n])
		if err != nil {
			return nil, err
		}
		lines = append(lines, more...)
		if done {
			return lines, nil
		}
	}
}

// diagRequest is a dump request for family's TCP sockets in LISTEN: a
// netlink header, then struct inet_diag_req_v2.
func diagRequest(family uint8) []byte {
	const size = unix.SizeofNlMsghdr + inetDiagReqV2Size
	b := make([]byte, size)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], size)
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	r := b[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 1<<unix.BPF_TCP_LISTEN) // idiag_states
	return b
}

// The sizes of struct inet_diag_req_v2 and struct inet_diag_msg
// (linux/inet_diag.h): each holds a 48-byte struct inet_diag_sockid.
const (
	inetDiagReqV2Size = 8 + 48
	inetDiagMsgSize   = 4 + 48 + 20
)

// parseDiag reads one datagram of a sock_diag dump: the listening
// sockets in it, and whether it ends the dump. Each struct inet_diag_msg
// holds the source port (big-endian) at 4 and the inode at 68.
func parseDiag(b []byte) (lines []listenLine, done bool, err error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return nil, false, fmt.Errorf("sock_diag: %w", err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_DONE:
			return lines, true, nil
		case unix.NLMSG_ERROR:
			if len(m.Data) < 4 {
				return nil, false, errors.New("sock_diag: a short error message")
			}
			return nil, false, fmt.Errorf("sock_diag: %w", syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data))))
		case unix.SOCK_DIAG_BY_FAMILY:
			if len(m.Data) < inetDiagMsgSize {
				return nil, false, fmt.Errorf("sock_diag: a message of %d bytes, want %d", len(m.Data), inetDiagMsgSize)
			}
			lines = append(lines, listenLine{
				port:  int(binary.BigEndian.Uint16(m.Data[4:])),
				inode: strconv.FormatUint(uint64(binary.NativeEndian.Uint32(m.Data[68:])), 10),
			})
		}
	}
	return lines, false, nil
}
