#!/bin/sh
# Prints the folder that holds the image NAME built from this tree's recipe:
#
#   deploy/images/path.sh NAME       NAME: tinyvm, debian-13 or debian-12
#
# ${XDG_CACHE_HOME:-~/.cache}/froog/built/NAME-HASH, HASH being a content
# hash of the recipe: every file under the recipe's folder (deploy/tinyvm
# for the test guest, deploy/images for the OS images; this script and
# ensure.sh aside; the test guest's also images/vmlinux.sh; the OS images'
# also the sources of the froog-desktop they carry: guest/, the desktop
# command, go.mod and go.sum) by name and content, NAME, and the versions
# of what it takes from this machine (the OS images' initrd: busybox-static;
# the test guest: busybox-static, openssh-server, openssh-sftp-server,
# e2fsprogs, and the kernel apt would download). A changed recipe is a
# new folder; an unchanged one is the same folder. It only prints: the
# folder exists once deploy/images/ensure.sh has built it (it is renamed
# into place whole), which `make test` runs through deploy/testdeps.sh and
# the tests run when it is missing. The one place that says where.
#
#   -v    print the hash's inputs instead
set -eu
verbose=
if [ "${1:-}" = -v ]; then verbose=1; shift; fi
name=${1:?usage: path.sh [-v] NAME (tinyvm, debian-13, debian-12)}
deploy=$(cd "$(dirname "$0")/.." && pwd)
case "$name" in
tinyvm) recipe=tinyvm ;;
debian-13 | debian-12) recipe=images ;;
*) echo "path.sh: no recipe for $name (tinyvm, debian-13, debian-12)" >&2; exit 2 ;;
esac
inputs() {
	# The scheme: bump it when what goes in changes meaning.
	echo "froog image cache 1: $name from deploy/$recipe"
	(cd "$deploy" && find "$recipe" -type f ! -name path.sh ! -name ensure.sh -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
	if [ "$recipe" = images ]; then
		# The OS image carries froogd as froog-desktop, built from this
		# tree: what of it runs in the guest (package guest, the desktop
		# command, the modules) is part of the recipe.
		(cd "$deploy/.." && find guest cmd/froogd/desktop.go go.mod go.sum -type f ! -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
		# Its initrd holds this machine's busybox (initrd.sh).
		dpkg-query -W -f '${Package} ${Version}\n' busybox-static 2>/dev/null || true
	fi
	if [ "$recipe" = tinyvm ]; then
		(cd "$deploy" && sha256sum images/vmlinux.sh) # it uncompresses the kernel
		dpkg-query -W -f '${Package} ${Version}\n' busybox-static openssh-server openssh-sftp-server e2fsprogs 2>/dev/null || true
		echo "linux-image-amd64 $(apt-cache policy linux-image-amd64 2>/dev/null | awk '/Candidate:/ { print $2 }')"
	fi
}
if [ -n "$verbose" ]; then
	inputs
	exit 0
fi
hash=$(inputs | sha256sum | cut -c1-16)
echo "${XDG_CACHE_HOME:-$HOME/.cache}/froog/built/$name-$hash"
