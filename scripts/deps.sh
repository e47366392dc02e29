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
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing >&2
