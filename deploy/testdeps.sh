#!/usr/bin/env bash
# Installs and starts what froog's test suite needs, when it is missing:
# PostgreSQL, listening on 127.0.0.1:5432 with trust auth for the postgres
# user (the default FROOG_TEST_DATABASE_URL); OpenSSH's client and server
# (the tunnel's tests and benchmarks run against them); python3 (the
# sandboxes' test server); git (a sandbox's setup clones the account's
# repos, from a bare repo the tests make); Chromium (the sandboxes'
# desktops' browser) and its headless shell (every page a person sees is
# checked in it); QEMU, qemu-img and busybox-static (the qemu driver's tests boot
# deploy/tinyvm's guest, built from them, OpenSSH's server and Debian's kernel,
# under TCG), e2fsprogs (the guest's journaled disk), mmdebstrap (the OS
# image the driver suite also boots, deploy/images) and nftables (its --net
# tap isolation); TigerVNC's Xvnc, xsetroot, xwallpaper, XFCE's window
# manager, panel and settings daemon (xfwm4, xfce4-panel, xfce4-settings:
# the desktop froog-desktop runs for the local driver, as the OS image's;
# guest/) and openbox (its fallback);
# xev (x11-utils: the application the desktop tests type into); xclip
# (the clipboard test copies and reads the sandbox's clipboard with it);
# PulseAudio and its pacat (pulseaudio, pulseaudio-utils: each screen's
# sound server, and the sound tests' player; guest/sound.go, with ffmpeg
# as its Opus encoder);
# dpkg-dev, debhelper, lintian and systemd (the Debian package's test:
# deploy/package.sh builds it, lintian checks it, systemd-analyze verifies
# its units, systemd-sysusers makes its user in a scratch root), and
# ffmpeg (x11grab and libx264: the H.264 encoder of the Selkies stand-in's
# tests, desktop/selkies_x264_test.go), and ngtcp2-client (gtlsclient,
# ngtcp2's and nghttp3's example client: the outside HTTP/3 client of the
# conformance test, e2e/h3_test.go).
# It builds the test guest and the OS image once, cached under
# ~/.cache/froog/built by their recipe's hash (deploy/images/ensure.sh), so
# that `go test` finds them. On Debian or Ubuntu as root it uses apt-get;
# elsewhere it says what to install and exits non-zero.
# With --bench it also installs what `make bench` compares against: nginx
# and Caddy (and curl, its bulk client), and builds the tunnel systems frp
# (frps, frpc) and chisel, pinned, from the Go module proxy into .bench/bin.
# Safe to run again: it does nothing when everything is there.
set -euo pipefail

say() { echo "testdeps: $*" >&2; }

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

apt_updated=
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  say "installing $* with apt-get"
  apt-get install -y -qq ${APT_FLAGS:-} "$@" >/dev/null
}

# Packages: a command (or file) that shows each is there.
missing=()
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core) # the sandboxes' browser, in their desktops
command -v chromium-headless-shell >/dev/null 2>&1 || missing+=(chromium-headless-shell) # the tests' browser (internal/browser)
# The VM tests' packages, without what they merely recommend (QEMU's GUI).
lean=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || lean+=(qemu-system-x86)
command -v qemu-img >/dev/null 2>&1 || lean+=(qemu-utils)
static_busybox() { local l; l=$(ldd "$(command -v busybox)" 2>&1 || true); [[ $l == *"not a dynamic"* ]]; }
command -v busybox >/dev/null 2>&1 && static_busybox || lean+=(busybox-static)
[ -x /usr/lib/openssh/sftp-server ] || lean+=(openssh-sftp-server) # the test guest's sftp subsystem
command -v nft >/dev/null 2>&1 || lean+=(nftables)
command -v ip >/dev/null 2>&1 || lean+=(iproute2) # the cluster test's network namespaces
[ -x /sbin/mke2fs ] || lean+=(e2fsprogs)
command -v mmdebstrap >/dev/null 2>&1 || lean+=(mmdebstrap)
command -v Xvnc >/dev/null 2>&1 || lean+=(tigervnc-standalone-server)
[ -f /usr/share/fonts/X11/misc/fonts.dir ] || lean+=(xfonts-base)
command -v xsetroot >/dev/null 2>&1 || lean+=(x11-xserver-utils)
command -v xwallpaper >/dev/null 2>&1 || lean+=(xwallpaper)
command -v openbox >/dev/null 2>&1 || lean+=(openbox)
command -v xfwm4 >/dev/null 2>&1 || lean+=(xfwm4)
command -v xfce4-panel >/dev/null 2>&1 || lean+=(xfce4-panel)
command -v xfsettingsd >/dev/null 2>&1 || lean+=(xfce4-settings)
command -v dbus-daemon >/dev/null 2>&1 || lean+=(dbus)
command -v xev >/dev/null 2>&1 || lean+=(x11-utils)
command -v xclip >/dev/null 2>&1 || lean+=(xclip)
command -v pulseaudio >/dev/null 2>&1 || lean+=(pulseaudio)
command -v pacat >/dev/null 2>&1 || lean+=(pulseaudio-utils)
command -v dpkg-buildpackage >/dev/null 2>&1 || lean+=(dpkg-dev)
command -v dh >/dev/null 2>&1 || lean+=(debhelper)
command -v lintian >/dev/null 2>&1 || lean+=(lintian)
command -v systemd-analyze >/dev/null 2>&1 && command -v systemd-sysusers >/dev/null 2>&1 || lean+=(systemd)
command -v ffmpeg >/dev/null 2>&1 || lean+=(ffmpeg)
command -v gtlsclient >/dev/null 2>&1 || lean+=(ngtcp2-client)
if [ "${1:-}" = --bench ]; then
  command -v nginx >/dev/null 2>&1 || missing+=(nginx)
  command -v caddy >/dev/null 2>&1 || missing+=(caddy)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
fi
if [ ${#missing[@]} -gt 0 ] || [ ${#lean[@]} -gt 0 ]; then
  if ! can_apt; then
    say "the tests need: ${missing[*]} ${lean[*]}; install them with your package manager"
    exit 1
  fi
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  [ ${#lean[@]} -eq 0 ] || APT_FLAGS=--no-install-recommends apt_install "${lean[@]}"
fi

# The VM tests' images, built once and cached by their recipe's hash
# (deploy/images/ensure.sh; deploy/images/path.sh says where), side by
# side, each one's progress on stderr: the test guest, and the OS image
# the driver suite boots (`make test` only; `make bench` boots the guest).
test_images() {
  local names=(tinyvm) pids=() failed=() i t0=$SECONDS
  [ "${1:-}" = --bench ] || names+=(debian-13)
  for i in "${names[@]}"; do
    if [ -d "$("$here/images/path.sh" "$i")" ]; then
      say "image $i: built"
      continue
    fi
    "$here/images/ensure.sh" "$i" 2>&1 >/dev/null | sed -u 's/^/testdeps: image /' >&2 &
    pids+=("$!:$i")
  done
  for i in "${pids[@]}"; do
    wait "${i%%:*}" || failed+=("${i#*:}")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    say "building ${failed[*]} failed (see above)"
    exit 1
  fi
  [ ${#pids[@]} -eq 0 ] || say "images built in $((SECONDS - t0))s"
}
here=$(cd "$(dirname "$0")" && pwd)

# The tunnel peers of `make bench`, at pinned versions, each built in its
# own module's folder with its own go.mod and go.sum (so nothing enters
# ours; `go install mod@version` would also ask the proxy for the module's
# version list, which not every proxy serves), into .bench/bin (ignored).
bench_tool() { # module version binary... (each binary's package in the module)
  local mod=$1 version=$2 bin=$here/../.bench/bin dir b
  shift 2
  if [ "$(cat "$bin/${mod##*/}.version" 2>/dev/null)" = "$mod@$version" ] && [ -x "$bin/${1%%=*}" ]; then
    say "$mod $version: built"
    return
  fi
  dir=$(go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { say "go mod download $mod@$version failed"; exit 1; }
  mkdir -p "$bin"
  for b in "$@"; do
    say "building ${b%%=*} from $mod $version"
    go build -C "$dir" -trimpath -o "$bin/${b%%=*}" "${b#*=}"
  done
  echo "$mod@$version" >"$bin/${mod##*/}.version"
}
if [ "${1:-}" = --bench ]; then
  bench_tool github.com/fatedier/frp v0.65.0 frps=./cmd/frps frpc=./cmd/frpc
  bench_tool github.com/jpillora/chisel v1.10.1 chisel=.
fi
test_images "$@"

db_url=${FROOG_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

pg_ok() {
  command -v psql >/dev/null 2>&1 && psql "$db_url" -Atqc 'select 1' >/dev/null 2>&1
}

if pg_ok; then
  exit 0
fi

if [ -n "${FROOG_TEST_DATABASE_URL:-}" ]; then
  say "FROOG_TEST_DATABASE_URL is set but Postgres does not answer there; start it, or unset it to let this script run a local one"
  exit 1
fi

if ! can_apt; then
  say "the tests need PostgreSQL (13 or newer) on 127.0.0.1:5432 with trust auth for user postgres,"
  say "or FROOG_TEST_DATABASE_URL pointing at one. Install it with your package manager and start it."
  exit 1
fi

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  apt_install postgresql postgresql-client
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if [ ! -d "/etc/postgresql/$version/main" ]; then
  say "creating cluster $version/main"
  pg_createcluster "$version" main >/dev/null
fi

# The tests connect over TCP as postgres without a password: trust that on
# loopback only, in this cluster's own pg_hba.conf.
hba="/etc/postgresql/$version/main/pg_hba.conf"
if ! grep -q '^host all postgres 127.0.0.1/32 trust' "$hba"; then
  sed -i '1i host all postgres 127.0.0.1/32 trust\nhost all postgres ::1/128 trust' "$hba"
fi

say "starting PostgreSQL $version"
pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || pg_ctlcluster --skip-systemctl-redirect "$version" main reload

for _ in $(seq 1 60); do
  if pg_ok; then
    say "PostgreSQL is ready"
    exit 0
  fi
  sleep 0.5
done
say "PostgreSQL did not come up on 127.0.0.1:5432; see /var/log/postgresql/"
exit 1
