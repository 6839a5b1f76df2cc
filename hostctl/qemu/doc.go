// Package qemu is the hostctl Driver that runs each sandbox as a QEMU VM
// controlled over QMP: KVM where /dev/kvm exists, TCG otherwise. A VM
// boots from its OS's base image through a qcow2 overlay of its own (a new
// sandbox costs no copy), with a NoCloud seed (ISO 9660, label cidata)
// that carries the host key hostctl generated, the authorized keys, the
// hostname and the network settings.
package qemu
