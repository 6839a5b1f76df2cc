#!/usr/bin/env bash
# Vendors noVNC for the desktop viewer: fetches @novnc/novnc at the pinned
# version with npm and copies what the page imports (the ES modules in
# core/ and vendor/) and the licences into desktop/assets/novnc/. The
# copied files are committed, so building froog needs no npm; run this
# only to change the version, then commit the result.
set -euo pipefail
version=1.7.0
cd "$(dirname "$0")/.."
dest=desktop/assets/novnc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@novnc/novnc@$version" >/dev/null && tar xzf novnc-novnc-"$version".tgz)
pkg=$tmp/package
got=$(node -p "require('$pkg/package.json').version")
[ "$got" = "$version" ] || { echo "novnc.sh: npm gave $got, want $version" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/docs"
cp -r "$pkg/core" "$pkg/vendor" "$pkg/LICENSE.txt" "$pkg/AUTHORS" "$dest/"
cp "$pkg"/docs/LICENSE.* "$dest/docs/"
echo "$version" >"$dest/VERSION"
# The vendored README of pako is not needed by the page.
rm -f "$dest/vendor/pako/README.md"
find "$dest" -type f -size +1M -exec sh -c 'echo "novnc.sh: $1 is over 1 MiB" >&2; exit 1' _ {} \;
echo "novnc.sh: noVNC $version in $dest ($(du -sk "$dest" | cut -f1) KiB)"
