// Package qemu is the hostctl Driver that runs each sandbox as a QEMU VM
// controlled over QMP: KVM where /dev/kvm exists, TCG otherwise. A VM
// boots from its OS's base image through a qcow2 overlay of its own (a new
// sandbox costs no copy), with a NoCloud seed (ISO 9660, label cidata)
// that carries the host key hostctl generated, the authorized keys, the
// hostname and the network settings. The VMs outlive the driver; a new
// one adopts them through their pid files and QMP sockets.
//
// New only checks Options (sizes, images, networking, binaries); the
// first Start sets up tap networking. The files by concern: qemu.go
// (Options, sizes, New), lifecycle.go (Start, Stop, Pause, Delete, Fork, Check, host keys),
// vm.go (the QEMU process: its arguments, launch, pid file, kill and
// wait, the QMP attach, the wait for SSH), bootwait.go (a boot given
// time while it progresses), backup.go (a running VM's disk copied
// without pausing it), snapshots.go (snapshots as copies of the
// overlay), qmp.go (the monitor under go-qemu's QMP API), disk.go
// (images, overlays, qemu-img, copies), warm.go (saving and restoring a
// paused VM's memory), guestssh.go (commands in the guest over SSH, with
// tunnel.DialSSH), tap.go (--net tap: the bridge, addresses, IPv4 and IPv6 isolation),
// spoof.go (each tap's guard: the guest's own MAC and addresses only, no
// router advertisements or DHCP servers),
// ports.go (the open ports of a sandbox's IPv6 address: hostctl.Firewall),
// tsc_amd64.go and tsc_other.go (the host's TSC rate, which a TCG guest is
// told) and seed.go (the seed ISO).
//
// It must not import api or edge (hostctl's rule); it logs in to guests
// only through tunnel.DialSSH, the one pinned-host-key dial.
package qemu
