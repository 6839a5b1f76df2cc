#!/usr/bin/env bash
# Builds the image NAME from this tree's recipe when it is not built yet,
# and prints its folder (deploy/images/path.sh says where):
#
#   deploy/images/ensure.sh NAME     NAME: tinyvm, debian-13 or debian-12
#
# Found: it prints the folder and builds nothing. Missing: it runs the
# recipe (deploy/tinyvm/build.sh, or deploy/images/build.sh NAME) into a
# temporary folder beside it and renames that into place once the build is
# whole, so an interrupted build never leaves a folder that looks built.
# Progress goes to stderr, each line prefixed with NAME and the time since
# the start: the recipe's own output, and every 15 s how far it has got.
# Two builds of the same image wait for each other (flock). deploy/testdeps.sh
# runs it for `make test`; the tests run it too (internal/testimage).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deploy=$(dirname "$here")
name=${1:?usage: ensure.sh NAME (tinyvm, debian-13, debian-12)}
dir=$(sh "$here/path.sh" "$name")
[ ! -d "$dir" ] || { echo "$dir"; exit 0; }

t0=$SECONDS
say() { echo "$name +$((SECONDS - t0))s: $*" >&2; }
mkdir -p "$(dirname "$dir")"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$dir.lock"
	if ! flock -n 9; then
		say "another build of it is under way; waiting for it"
		flock 9
	fi
	[ ! -d "$dir" ] || { say "built by the other"; echo "$dir"; exit 0; }
fi
case "$name" in
tinyvm) build=("$deploy/tinyvm/build.sh") ;;
*) build=("$deploy/images/build.sh" "$name") ;;
esac
# What an interrupted build left (we hold the lock: nobody else builds it).
rm -rf --one-file-system "$dir".tmp.*
tmp=$dir.tmp.$$
heartbeat=
recipe=
cleanup() {
	[ -z "$heartbeat" ] || kill "$heartbeat" 2>/dev/null || true
	# The recipe runs in a session of its own (a Ctrl-C reaches only this
	# script): end all of it, and let it unmount what it mounted (mmdebstrap)
	# before its scratch space goes.
	if [ -n "$recipe" ]; then
		kill -TERM -- "-$recipe" 2>/dev/null || true
		wait "$recipe" 2>/dev/null || true
	fi
	rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$tmp/work" "$tmp/out"
# An OS image's packages change less often than the froog-desktop it
# carries (both in its hash): the newest image of the name built before
# lends its package tree and Selkies (hard links), which build.sh reuses
# when their stamps match, so new guest sources remake only the disk.
if [ "$name" != tinyvm ]; then
	for prev in $(ls -dt "$(dirname "$dir")/$name"-*/ 2>/dev/null | grep -v '\.tmp\.'); do
		[ -f "$prev/base.tar" ] && [ -f "$prev/base.stamp" ] || continue
		for f in base.tar base.stamp selkies.tar selkies.stamp; do
			[ ! -f "$prev/$f" ] || ln "$prev/$f" "$tmp/out/$f" 2>/dev/null || cp "$prev/$f" "$tmp/out/$f"
		done
		say "reusing the packages of $(basename "$prev")"
		break
	done
fi
say "building $(basename "$dir") with ${build[*]/#"$deploy"/deploy} (deploy/images/path.sh -v $name lists what its hash covers)"
(
	while sleep 15 >/dev/null 2>&1; do
		say "still building: $(du -sm "$tmp" 2>/dev/null | cut -f1) MB so far"
	done
) &
heartbeat=$!
# The recipe's scratch space is in tmp too, on the cache's file system:
# everything goes when the build ends, whichever way it ends.
exec 8> >(while IFS= read -r line; do say "$line"; done)
prefix=$!
TMPDIR=$tmp/work setsid sh "${build[@]}" "$tmp/out" >&8 2>&8 8>&- &
recipe=$!
status=0
wait "$recipe" || status=$?
recipe=
exec 8>&-
wait "$prefix" || true
kill "$heartbeat" 2>/dev/null || true
heartbeat=
[ "$status" = 0 ] || { say "the recipe failed (exit $status)"; exit 1; }
case "$name" in
tinyvm) want=(vmlinux initramfs.gz) ;;
*) want=(disk.qcow2 vmlinux initrd.img cmdline) ;;
esac
for f in "${want[@]}"; do
	[ -s "$tmp/out/$f" ] || { say "the recipe made no $f"; exit 1; }
done
sh "$here/path.sh" -v "$name" >"$tmp/out/recipe"
sync "$tmp/out"/*
mv -T "$tmp/out" "$dir"
say "built in $((SECONDS - t0))s: $dir ($(du -sm "$dir" | cut -f1) MB)"
echo "$dir"
