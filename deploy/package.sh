#!/usr/bin/env bash
# Builds the Debian package dist/froogd_VERSION_amd64.deb with Debian's own
# tools (debhelper, dpkg-buildpackage), offline: the binaries (froogd and
# the froog CLI, with its shell completions) are built here with the Go
# toolchain and modules already on this machine, then handed to debhelper
# with the systemd units (deploy/systemd), the system user
# (sysusers.d) and the example environment files, which `froogd
# env-example` writes from the flag definitions so that they cannot drift.
#
#   deploy/package.sh            # into dist/
#   DIST=/tmp/out deploy/package.sh
#
# Needs: go, dpkg-dev, debhelper (deploy/testdeps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
DIST=${DIST:-dist}
VERSION=${VERSION:-$(deploy/version.sh)}
REVISION=$(git rev-parse HEAD)
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/froogd-$VERSION
mkdir -p "$src/env"
cp -r deploy/debian "$src/debian"
for u in deploy/systemd/froogd-*.service; do
  name=$(basename "$u")
  cp "$u" "$src/debian/froogd.$name"
done
cp README.md "$src/README.md"
cp -r docs "$src/docs" # the guides the README links to, operators' among them

# The binary: static (no cgo), paths trimmed, version and commit stamped.
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath \
  -ldflags "-s -w -buildid= -X froog.tech/froog/internal/version.stamped=$VERSION -X froog.tech/froog/internal/version.revision=$REVISION" \
  -o "$src/froogd" ./cmd/froogd
# The froog CLI beside it (on the same API), and its shell completions.
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath -ldflags "-s -w -buildid=" -o "$src/froog" ./cmd/froog
mkdir -p "$src/completions/bash" "$src/completions/zsh" "$src/completions/fish"
"$src/froog" completions bash > "$src/completions/bash/froog"
"$src/froog" completions zsh > "$src/completions/zsh/_froog"
"$src/froog" completions fish > "$src/completions/fish/froog.fish"

# The example environment files, from the binary's own flags. The service
# user's HOME is /var/lib/froog: defaults under it are shown as the units
# see them. VAR=VALUE lines are what a packaged install needs set.
gen() { env -i HOME=/var/lib/froog PATH=/usr/bin:/bin "$src/froogd" env-example "$@"; }
gen common \
  FROOG_DATABASE_URL='postgres:///froog?host=/run/postgresql' \
  FROOG_CONTROL_KEY_FILE=/etc/froog/control_key \
  FROOG_SECRET_KEY_FILE=/etc/froog/secret.key \
  FROOG_DOMAIN=froogusercontent.example \
  > "$src/env/froog.env"
gen edge FROOG_EDGE_ADDR=:443 FROOG_EDGE_HTTP_ADDR=:80 FROOG_METRICS_ADDR=127.0.0.1:9101 > "$src/env/edge.env"
gen api FROOG_API_ADDR=127.0.0.1:8080 FROOG_METRICS_ADDR=127.0.0.1:9102 > "$src/env/api.env"
gen hostctl FROOG_HOST_NAME=host-1 FROOG_DRIVER=qemu FROOG_DATA=/var/lib/froog FROOG_METRICS_ADDR=127.0.0.1:9103 > "$src/env/hostctl.env"
gen migrate > "$src/env/migrate.env"

# The changelog carries the version; its date is the commit's, which
# dpkg-buildpackage also takes as SOURCE_DATE_EPOCH (file times in the
# package), so one commit always gives the same package contents.
date=$(git log -1 --format=%cD)
cat > "$src/debian/changelog" <<CHANGES
froogd ($VERSION) unstable; urgency=medium

  * Built from commit $REVISION.

 -- froog <ops@froog.tech>  $date
CHANGES

(cd "$src" && dpkg-buildpackage -b -us -uc -tc >"$work/build.log" 2>&1) || { cat "$work/build.log" >&2; exit 1; }
deb=froogd_${VERSION}_amd64.deb
mv "$work/$deb" "$DIST/$deb"
echo "$DIST/$deb"
