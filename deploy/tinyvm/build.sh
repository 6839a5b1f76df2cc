#!/bin/sh
# Builds the test guest from Debian packages only: Debian's kernel
# (linux-image-amd64, extracted, not installed), busybox-static, OpenSSH's
# sshd and sftp-server (the SSH server froog's images run, and its sftp
# subsystem: the files API), e2fsprogs' mke2fs and the kernel modules it
# needs, into OUT/vmlinux and OUT/initramfs.gz.
# OUT/vmlinux is the kernel uncompressed (deploy/images/vmlinux.sh), which
# QEMU starts directly.
# The init (deploy/tinyvm/init) reads the same NoCloud seed as cloud-init.
#
#   deploy/tinyvm/build.sh [OUT]      (default: ~/.cache/froog/tinyvm)
#
# It does nothing when OUT already holds a build of this script and init.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/froog/tinyvm}
stamp=$(cat "$here/build.sh" "$here/init" "$here/../images/vmlinux.sh" | sha256sum | cut -c1-16)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] && [ -f "$out/vmlinux" ] && [ -f "$out/initramfs.gz" ]; then
	exit 0
fi
for bin in busybox /usr/sbin/sshd /sbin/mke2fs /usr/lib/openssh/sftp-server apt-get dpkg-deb; do
	command -v "$bin" >/dev/null || { echo "tinyvm: $bin is missing (deploy/testdeps.sh installs it)" >&2; exit 1; }
done
case "$(ldd "$(command -v busybox)" 2>&1 || true)" in
*"not a dynamic"*) ;;
*) echo "tinyvm: busybox is not the static one (install busybox-static)" >&2; exit 1 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[ -n "$kpkg" ] || { echo "tinyvm: no kernel package behind linux-image-amd64" >&2; exit 1; }
apt-get download -q -o APT::Sandbox::User=root "$kpkg" >/dev/null
dpkg-deb -x ./"$kpkg"_*.deb kernel
kver=$(ls kernel/lib/modules)

root=$work/root
mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/etc/ssh" "$root/proc" "$root/sys" \
	"$root/dev" "$root/tmp" "$root/run" "$root/root" "$root/home" "$root/seed" "$root/lib/modules/$kver" "$root/var/log"
cp "$(command -v busybox)" "$root/bin/busybox"
for b in $(busybox --list); do
	[ -e "$root/bin/$b" ] || ln -s busybox "$root/bin/$b"
done
# sshd (with the helpers OpenSSH 9.8 and later split off, where this
# machine's has them), sftp-server and mke2fs (busybox's makes no journal,
# and a disk without one does not survive QEMU ending the VM), with the
# libraries they load.
bins="/usr/sbin/sshd /usr/lib/openssh/sftp-server"
for b in /usr/lib/openssh/sshd-session /usr/lib/openssh/sshd-auth; do
	[ ! -x "$b" ] || bins="$bins $b"
done
for b in $bins; do
	mkdir -p "$root$(dirname "$b")"
	cp "$b" "$root$b"
done
cp /sbin/mke2fs "$root/usr/sbin/mke2fs" # ahead of busybox's on init's PATH
bins="$bins /sbin/mke2fs"
[ ! -f /etc/mke2fs.conf ] || cp /etc/mke2fs.conf "$root/etc/mke2fs.conf"
for lib in $(ldd $bins | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }' | sort -u); do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
# The modules, in the order init loads them, and what ext4 pulls in.
mods="drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci_modern_dev
drivers/virtio/virtio_pci drivers/block/virtio_blk net/core/failover drivers/net/net_failover drivers/net/virtio_net
drivers/char/hw_random/virtio-rng drivers/cdrom/cdrom fs/isofs/isofs lib/crc16 fs/mbcache fs/jbd2/jbd2 crypto/crc32c_generic lib/libcrc32c fs/ext4/ext4"
for m in $mods; do
	src=$(ls kernel/lib/modules/"$kver"/kernel/"$m".ko* 2>/dev/null | head -n1)
	[ -n "$src" ] || { echo "tinyvm: module $m not in $kpkg" >&2; exit 1; }
	mkdir -p "$root/lib/modules/$kver/kernel/$(dirname "$m")"
	case "$src" in
	*.ko.xz) xz -dc "$src" >"$root/lib/modules/$kver/kernel/$m.ko" ;;
	*.ko.zst) zstd -qdc "$src" >"$root/lib/modules/$kver/kernel/$m.ko" ;;
	*) cp "$src" "$root/lib/modules/$kver/kernel/$m.ko" ;;
	esac
done
cp kernel/lib/modules/"$kver"/modules.builtin kernel/lib/modules/"$kver"/modules.order "$root/lib/modules/$kver/"
busybox depmod -b "$root" "$kver"
cp "$here/init" "$root/init"
chmod 755 "$root/init"
# sshd's privilege separation runs as sshd, in /run/sshd.
printf 'root::0:0:root:/root:/bin/sh\nuser::1000:1000:user:/home/user:/bin/sh\nsshd:x:100:65534::/run/sshd:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
# As froog's images: keys only, as user; one connection per sandbox carries
# its commands and file sessions (MaxSessions); errors to the console.
cat >"$root/etc/ssh/sshd_config" <<'CFG'
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
MaxSessions 64
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel ERROR
CFG
printf '/bin/sh\n' >"$root/etc/shells"

mkdir -p "$out"
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$out/initramfs.gz.new"
sh "$here/../images/vmlinux.sh" kernel/boot/vmlinuz-"$kver" "$out/vmlinux"
mv "$out/initramfs.gz.new" "$out/initramfs.gz"
echo "$stamp" >"$out/stamp"
echo "tinyvm: $out (kernel $kver)"
