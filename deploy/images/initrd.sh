#!/bin/sh
# Writes an OS image's initrd to OUT: busybox (this machine's static one),
# the modules that reach the root file system and the network (virtio_blk,
# ext4, virtio_net and what they need, from ROOT's kernel) and an init that
# loads them, mounts the root= device and starts the image's own init
# (systemd). Debian's own initrd (initramfs-tools: 36 MB, with udev and
# every storage driver) is most of a boot's kernel stage under TCG: Debian
# 13's reached systemd 8 s after the kernel started with it, 3 s with this
# one (2 MB).
#
#   deploy/images/initrd.sh ROOT OUT
set -eu
root=${1:?usage: initrd.sh ROOT OUT}
out=${2:?usage: initrd.sh ROOT OUT}
for bin in busybox xz zstd gzip; do
	command -v "$bin" >/dev/null || { echo "initrd: $bin is missing (deploy/testdeps.sh installs it)" >&2; exit 1; }
done
case "$(ldd "$(command -v busybox)" 2>&1 || true)" in
*"not a dynamic"*) ;;
*) echo "initrd: busybox is not the static one (install busybox-static)" >&2; exit 1 ;;
esac
kver=$(ls "$root/lib/modules")
mods=$root/lib/modules/$kver
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/dev" "$work/proc" "$work/root" "$work/lib/modules/$kver"
cp "$(command -v busybox)" "$work/bin/busybox"
for b in sh mount umount modprobe switch_root sleep cat; do
	ln -s busybox "$work/bin/$b"
done
# Each module with what modules.dep says it needs; one built into the
# kernel needs nothing. The network's driver too: ifupdown brings eth0 up
# once, when networking.service starts, and fails if udev has not loaded
# the driver by then.
load="virtio_blk crc32c_generic ext4 virtio_net"
for m in $load; do
	line=$(grep -E "(^|/)$m\.ko(\.xz|\.zst)?:" "$mods/modules.dep" || true)
	if [ -z "$line" ]; then
		grep -qE "/$m\.ko$" "$mods/modules.builtin" || { echo "initrd: module $m is not in kernel $kver" >&2; exit 1; }
		continue
	fi
	for f in ${line%%:*} ${line#*:}; do
		ko=$work/lib/modules/$kver/${f%.xz}
		ko=${ko%.zst}
		mkdir -p "$(dirname "$ko")"
		case "$f" in
		*.xz) xz -dc "$mods/$f" >"$ko" ;;
		*.zst) zstd -qdc "$mods/$f" >"$ko" ;;
		*) cp "$mods/$f" "$ko" ;;
		esac
	done
done
cp "$mods/modules.builtin" "$mods/modules.order" "$work/lib/modules/$kver/"
busybox depmod -b "$work" "$kver"
cat >"$work/init" <<EOF
#!/bin/sh
# froog's initrd (deploy/images/initrd.sh): the root file system's
# modules, then root= mounted (rw or ro, as the command line says) and
# the image's init started on it. A failure says why on the console and
# ends the boot (the kernel panics: QEMU exits, hostctl reports it).
export PATH=/bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
dev=/dev/vda mode=ro
for a in \$(cat /proc/cmdline); do
	case "\$a" in
	root=*) dev=\${a#root=} ;;
	rw | ro) mode=\$a ;;
	esac
done
for m in $load; do
	modprobe "\$m" || echo "froog initrd: module \$m did not load" >/dev/console
done
i=0
while [ ! -b "\$dev" ] && [ \$i -lt 1000 ]; do sleep 0.01; i=\$((i + 1)); done
mount -t ext4 -o "\$mode" "\$dev" /root || { echo "froog initrd: \$dev did not mount" >/dev/console; exit 1; }
umount /proc
mount --move /dev /root/dev
exec switch_root /root /sbin/init
EOF
chmod 755 "$work/init"
(cd "$work" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$out.new"
mv "$out.new" "$out"
