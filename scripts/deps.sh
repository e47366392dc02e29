#!/usr/bin/env bash
# Installs the Debian packages btr needs to build and test, if missing.
# Used by `make test` and `make demo`; safe to run repeatedly.
set -eu
# One package a line, so that additions merge without conflicts.
pkgs="
  build-essential
  cmake
  pkg-config
  libzydis-dev
  libzstd-dev
  libelf-dev
  libdw-dev
  libipt-dev
  qemu-user
  qemu-user-static
  clang
  libfuzzer-14-dev
  libclang-rt-14-dev
  python3
  valgrind
  time
  bc
  bolt-16
  clang-16
  llvm-16
  golang-go
  libcapstone-dev
  python3-jsonschema
  python3-numpy
  python3-pandas
  python3-dask
  python3-distributed
  python3-venv
  python3-setuptools
  python3-pip
  python3-wheel
  zlib1g-dev
  gdb
  libc6-dbg
  linux-perf
  graphviz
  lcov
  libxml2-utils
  chromium
  nodejs
  luajit
  ruby
  strace
"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# qemu-system-x86 10 (plugin API v4: guest registers; `btr record --system`):
# Debian 12's own is 7.2, so on bookworm it comes from bookworm-backports
# (the apt source scripts/build-qemu.sh adds, with the suite's deb-src).
if ! dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null | grep -q '^1:1[0-9]'; then
  if grep -qs bookworm-backports /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null; then
    echo "deps: installing qemu-system-x86 from bookworm-backports" >&2
    S=""; [ "$(id -u)" -ne 0 ] && S="sudo"
    # pkg/suite, not -t: -t would take every package named from backports and
    # upgrade qemu-user to 10.0, a static build that cannot load plugins.
    DEBIAN_FRONTEND=noninteractive $S apt-get install -y -q --no-install-recommends \
      qemu-system-x86/bookworm-backports >&2 || echo "deps: qemu-system-x86 10 not installed (btr record --system needs it)" >&2
  elif grep -qs 'VERSION_CODENAME=trixie' /etc/os-release; then
    missing="$missing qemu-system-x86"
  fi
fi
# The guest's kernel and busybox for `btr record --system`, only where that
# QEMU is (a kernel package runs update-initramfs: minutes CI need not spend).
if dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null | grep -q '^1:1[0-9]' || echo "$missing" | grep -q qemu-system-x86; then
  for p in busybox-static linux-image-amd64; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
fi
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing >&2
