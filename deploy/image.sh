#!/usr/bin/env bash
# Builds the container image for froog's stateless roles (froogd edge,
# froogd api) as an OCI image layout in one tar file,
# dist/froogd_VERSION_oci.tar, without a Docker daemon (deploy/image,
# go-containerregistry as a library). Its one layer is the static froogd,
# Debian's CA bundle (package ca-certificates, from this machine) and a
# non-root user; the same commit and CA bundle give the same digest.
#
#   deploy/image.sh                        # prints the tar's path and the digest
#   skopeo copy oci-archive:dist/froogd_V_oci.tar docker://registry.example/froogd:V
#   podman load -i dist/froogd_V_oci.tar
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
DIST=${DIST:-dist}
VERSION=${VERSION:-$(deploy/version.sh)}
REVISION=$(git rev-parse HEAD)
CREATED=$(git log -1 --format=%ct)
[ -f /etc/ssl/certs/ca-certificates.crt ] || { echo "image: no CA bundle: apt-get install ca-certificates" >&2; exit 1; }
mkdir -p "$DIST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath \
  -ldflags "-s -w -buildid= -X froog.tech/froog/internal/version.stamped=$VERSION -X froog.tech/froog/internal/version.revision=$REVISION" \
  -o "$work/froogd" ./cmd/froogd
out=$DIST/froogd_${VERSION}_oci.tar
digest=$("$GO" run ./deploy/image -binary "$work/froogd" -version "$VERSION" -revision "$REVISION" -created "$CREATED" -out "$out")
echo "$out $digest"
