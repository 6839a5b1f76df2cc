#!/bin/sh
# Builds an OS image for the qemu driver from Debian's packages: a root
# file system with systemd and OpenSSH (mmdebstrap), cleaned of keys,
# machine id and logs, as OUT/disk.qcow2, with its kernel and initrd
# beside it (OUT/vmlinux, uncompressed: see vmlinux.sh; OUT/initrd.img,
# froog's own: see initrd.sh) and their command line (OUT/cmdline).
# froogd takes it with --image OS=OUT. Every sandbox's disk is an overlay
# on disk.qcow2; froog-init (froogd by that name, package guest/seed)
# reads froog's NoCloud seed early in every boot (host key, user, keys,
# network), as the test guest's init does.
#
#   deploy/images/build.sh OS [OUT]   OS: debian-13 or debian-12 (default OUT: ~/.cache/froog/images/OS)
#
# froogd is built from this checkout (go build), or taken from $FROOGD.
# It does nothing when OUT already holds a build of this script and this
# froogd. The packages are the slow part: they are kept as OUT/base.tar,
# made again only when this script changes; a new froogd only remakes the
# disk from it. Needs root (mmdebstrap's root mode), Go (or $FROOGD) and
# Debian's mirror. Selkies (the desktops' fast stream) is installed where
# Python's package index and GitHub are reachable, into /opt/selkies (kept
# as OUT/selkies.tar); where they are not, the image is made without it
# and its desktops use VNC.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
os=${1:?usage: build.sh OS [OUT]}
case "$os" in
debian-13) suite=trixie ;;
debian-12) suite=bookworm ;;
*) echo "images: no recipe for $os (debian-13, debian-12)" >&2; exit 2 ;;
esac
out=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/froog/images/$os}
for bin in mmdebstrap mke2fs qemu-img; do
	command -v "$bin" >/dev/null || { echo "images: $bin is missing (deploy/testdeps.sh installs it)" >&2; exit 1; }
done
work=$(mktemp -d)
root=$work/root
# settle_root ends what the packages' scripts left running in the root
# and unmounts what is still mounted there (mmdebstrap's /proc, when a
# process kept it busy): neither may end up in the image, and a mount
# there stops the work folder's removal.
settle_root() {
	case "${root:-}" in /?*/*) ;; *) return 0 ;; esac # never / or a top folder
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
	done
	awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
		umount -l "$m" || true
	done
}
trap 'settle_root; rm -rf "$work"' EXIT

# froogd, static, for froog-desktop inside the guest.
if [ -n "${FROOGD:-}" ]; then
	cp "$FROOGD" "$work/froogd"
else
	(cd "$here/../.." && CGO_ENABLED=0 go build -trimpath -o "$work/froogd" ./cmd/froogd)
fi
base_stamp=$(cat "$here/build.sh" | sha256sum | cut -c1-16)
stamp=$(cat "$here/build.sh" "$here/vmlinux.sh" "$here/initrd.sh" "$work/froogd" | sha256sum | cut -c1-16)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then
	exit 0
fi
mkdir -p "$out" "$root"


if [ -f "$out/base.tar" ] && [ -f "$out/base.stamp" ] && [ "$(cat "$out/base.stamp")" = "$base_stamp" ]; then
	tar -C "$root" --numeric-owner -xpf "$out/base.tar"
else
	mirror=${FROOG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
	# What every froog sandbox has: sudo for user, SSH (froog-init, below,
	# gives them their seed); and the
	# desktop: XFCE's parts (not the xfce4 metapackage, which brings a file
	# manager, xfdesktop and more), Chromium, Xvnc, the background tools, and
	# fonts for web pages; the sound: PulseAudio (a server per screen),
	# pulseaudio-utils (pacat, paplay) and ffmpeg (its Opus encoder,
	# guest/sound.go).
	# python3-venv is for Selkies (below).
	desktop=tigervnc-standalone-server,xfwm4,xfce4-panel,xfce4-settings,xfconf,xfce4-terminal,exo-utils,dbus,chromium,xwallpaper,x11-xserver-utils,x11-utils,xdotool,xfonts-base,fonts-dejavu-core,fonts-liberation2,adwaita-icon-theme,pulseaudio,pulseaudio-utils,ffmpeg,python3-venv
	mmdebstrap --quiet --mode=root --variant=minbase \
		--include=linux-image-amd64,initramfs-tools,systemd-sysv,udev,kmod,openssh-server,sudo,ifupdown,isc-dhcp-client,netbase,iproute2,e2fsprogs,ca-certificates,curl,git,$desktop \
		"$suite" "$root" "$mirror"

	settle_root
	printf '/dev/vda / ext4 errors=remount-ro 0 1\n' >"$root/etc/fstab"
	# The locale, set here: nothing sets it at boot.
	echo LANG=C.UTF-8 >"$root/etc/default/locale"
	# Not at every sandbox's boot: e2scrub_reap (LVM snapshots; there are
	# none) and what systemd re-runs when /etc or /var looks older than
	# /usr (ldconfig, the hwdb, the journal's catalog: up to date here;
	# the stamps are set last, below).
	ln -sf /dev/null "$root/etc/systemd/system/e2scrub_reap.service"
	# The SSH server takes keys only, as user.
	cat >"$root/etc/ssh/sshd_config.d/10-froog.conf" <<-'CFG'
	PasswordAuthentication no
	KbdInteractiveAuthentication no
	PermitRootLogin no
	# The control plane shares one connection per sandbox between commands
	# and file sessions (sftp): more than the default 10 at once.
	MaxSessions 64
	CFG
	# Every connection from the host comes from one address (QEMU's
	# user-mode network's 10.0.2.2, or the tap bridge's): the control
	# plane's, its probes while the guest boots, and the users' through
	# the forwarded port. OpenSSH's penalties per source (since 9.8: 15 s
	# of connections that end before authenticating, as boot probes under
	# TCG do) would lock all of them out at once.
	if [ "$suite" != bookworm ]; then
		echo 'PerSourcePenalties no' >>"$root/etc/ssh/sshd_config.d/10-froog.conf"
	fi
	# Cleaned: no host keys, machine id or logs travel with the image.
	rm -f "$root"/etc/ssh/ssh_host_* "$root/var/lib/dbus/machine-id"
	: >"$root/etc/machine-id"
	rm -rf "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
	# What is in it.
	chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' linux-image-amd64 openssh-server systemd tigervnc-standalone-server xfwm4 chromium >"$root/etc/froog-image"
	rm -f "$out/base.stamp"
	settle_root
	tar -C "$root" --numeric-owner --one-file-system -cf "$out/base.tar.new" .
	mv "$out/base.tar.new" "$out/base.tar"
	echo "$base_stamp" >"$out/base.stamp"
fi

# Selkies, the fast stream (froog-desktop runs it next to Xvnc when it is
# installed), pinned to the commit froog's edge was written against
# (desktop/selkies.go): pip builds it from GitHub's archive of that commit,
# its dependencies (pixelflux, pcmflux, aiohttp, …) from the package index.
# Kept as OUT/selkies.tar for that commit. Where the index is not reachable
# (this project's build machine) the image is made without it.
selkies_commit=3a0bc7af4b3c0b6270bd1173f8f20c41348d17ea
selkies_src=${FROOG_SELKIES_SRC:-https://github.com/selkies-project/selkies/archive/$selkies_commit.tar.gz}
pypi=${FROOG_PYPI:-https://pypi.org/simple/}
if [ -f "$out/selkies.tar" ] && [ "$(cat "$out/selkies.stamp" 2>/dev/null)" = "$selkies_commit $os" ]; then
	tar -C "$root" --numeric-owner -xpf "$out/selkies.tar"
elif curl -fsS --max-time 15 -o /dev/null "${pypi}pip/" && curl -fsSI --max-time 15 -o /dev/null -L "$selkies_src"; then
	cp -L /etc/resolv.conf "$root/etc/resolv.conf.froog"
	mv "$root/etc/resolv.conf" "$root/etc/resolv.conf.image" 2>/dev/null || true
	mv "$root/etc/resolv.conf.froog" "$root/etc/resolv.conf"
	if chroot "$root" python3 -m venv /opt/selkies &&
		chroot "$root" /opt/selkies/bin/pip install --quiet --no-cache-dir --index-url "$pypi" "$selkies_src"; then
		rm -f "$out/selkies.stamp"
		tar -C "$root" --numeric-owner -cf "$out/selkies.tar.new" opt/selkies
		mv "$out/selkies.tar.new" "$out/selkies.tar"
		echo "$selkies_commit $os" >"$out/selkies.stamp"
	else
		echo "images: installing Selkies failed: the image's desktops use VNC" >&2
		rm -rf "$root/opt/selkies"
	fi
	rm -f "$root/etc/resolv.conf"
	mv "$root/etc/resolv.conf.image" "$root/etc/resolv.conf" 2>/dev/null || true
	settle_root
else
	echo "images: $pypi or $selkies_src is not reachable: the image has no Selkies; its desktops use VNC" >&2
fi
if [ -x "$root/opt/selkies/bin/selkies" ]; then
	ln -sf /opt/selkies/bin/selkies "$root/usr/local/bin/selkies"
fi

# froogd, which is froog-desktop and froog-init by those names.
install -m 0755 "$work/froogd" "$root/usr/local/bin/froogd"
ln -sf froogd "$root/usr/local/bin/froog-desktop"
ln -sf froogd "$root/usr/local/bin/froog-init"
# froog-init gives the guest its seed at every boot, once the root is
# writable and before the network and the SSH server start; what it did
# (or why it failed) goes to the console, where hostctl's boot watch reads
# it.
cat >"$root/etc/systemd/system/froog-init.service" <<-'UNIT'
[Unit]
Description=froog: this sandbox's name, user, keys and network, from its seed
DefaultDependencies=no
Requires=local-fs.target
After=local-fs.target systemd-remount-fs.service
Before=sysinit.target network-pre.target ssh.service systemd-user-sessions.service
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/bin/froog-init
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=sysinit.target
UNIT
mkdir -p "$root/etc/systemd/system/sysinit.target.wants"
ln -sf ../froog-init.service "$root/etc/systemd/system/sysinit.target.wants/froog-init.service"

kver=$(ls "$root/lib/modules")
rm -f "$out/stamp"
sh "$here/vmlinux.sh" "$root/boot/vmlinuz-$kver" "$out/vmlinux"
sh "$here/initrd.sh" "$root" "$out/initrd.img"
# Not loaded at boot: drivers for what a froog VM does not have or use
# (SATA, a PC speaker, a watchdog, VMware's and KVM's own modules, the
# CPU's crypto and frequency drivers). Under TCG every module udev loads
# costs seconds; these cut a cold boot by a tenth. The ACPI button and
# evdev stay: a graceful stop is the power button.
unused=kvm,kvm_amd,kvm_intel,vmw_vmci,vmw_vsock_vmci_transport,pcspkr,iTCO_wdt,iTCO_vendor_support,lpc_ich,i2c_i801,powernow_k8,ahci,libahci,joydev,serio_raw,cryptd,aesni_intel,ghash_clmulni_intel,sha1_ssse3,sha256_ssse3,sha512_ssse3,intel_rapl_msr,intel_rapl_common,intel_pmc_core,drm,bochs,qemu_fw_cfg,efi_pstore
printf 'root=/dev/vda rw console=ttyS0 panic=-1 net.ifnames=0 modprobe.blacklist=%s\n' "$unused" >"$out/cmdline"
touch -r "$root/usr" "$root/etc/.updated" "$root/var/.updated"
settle_root
size=$(( $(du -sm "$root" | cut -f1) * 3 / 2 + 512 ))
mke2fs -q -F -t ext4 -L root -d "$root" "$work/disk.raw" "${size}M"
qemu-img convert -O qcow2 "$work/disk.raw" "$out/disk.qcow2.new"
mv "$out/disk.qcow2.new" "$out/disk.qcow2"
echo "$stamp" >"$out/stamp"
echo "images: $out ($os, kernel $kver, ${size} MB)"
