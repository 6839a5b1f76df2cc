#!/bin/sh
# Writes the kernel of the bzImage IN uncompressed to OUT: an ELF with a
# PVH entry point (Debian's kernels have one), which QEMU loads and starts
# directly, without firmware and without the bzImage decompressing
# itself. Under TCG those took half of a cold boot (the test guest: 12 s
# to SSH, 6 s as an ELF); under KVM the ELF boots a little sooner too.
#
#   deploy/images/vmlinux.sh IN OUT
#
# The bzImage's setup header says where its payload (the compressed ELF)
# is: setup_sects at 0x1f1, payload_offset and payload_length at 0x248.
# A decompressor stops at the end of its stream; the 4 bytes after it
# (the size, for the kernel's own decompressor) make some complain, so
# what counts is an ELF coming out.
set -eu
in=${1:?usage: vmlinux.sh IN OUT}
out=${2:?usage: vmlinux.sh IN OUT}
for bin in od xz zstd gzip; do
	command -v "$bin" >/dev/null || { echo "vmlinux: $bin is missing" >&2; exit 1; }
done
sects=$(od -An -tu1 -j497 -N1 "$in" | tr -d ' ')
[ "$sects" != 0 ] || sects=4
off=$(od -An -tu4 -j584 -N4 "$in" | tr -d ' ')
len=$(od -An -tu4 -j588 -N4 "$in" | tr -d ' ')
payload=$(mktemp)
trap 'rm -f "$payload" "$out.new"' EXIT
tail -c +$(((sects + 1) * 512 + off + 1)) "$in" | head -c "$len" >"$payload"
case "$(od -An -tx1 -N4 "$payload" | tr -d ' ')" in
fd377a58) xz -dc --single-stream "$payload" >"$out.new" || true ;;
28b52ffd) zstd -qdc "$payload" >"$out.new" 2>/dev/null || true ;;
1f8b08*) gzip -dc "$payload" >"$out.new" 2>/dev/null || true ;;
*) echo "vmlinux: $in is not a bzImage compressed with xz, zstd or gzip" >&2; exit 1 ;;
esac
[ "$(od -An -tx1 -N4 "$out.new" | tr -d ' ')" = 7f454c46 ] || { echo "vmlinux: $in did not decompress to an ELF" >&2; exit 1; }
mv "$out.new" "$out"
