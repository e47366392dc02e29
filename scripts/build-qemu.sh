#!/usr/bin/env bash
# Builds a plugin-capable qemu-x86_64 from the distribution's QEMU source
# package and caches it outside the build tree, keyed by the source version:
#   ${BTR_QEMU_CACHE:-${XDG_CACHE_HOME:-~/.cache}/btr}/qemu-VERSION/bin/qemu-x86_64
# A second run finds the cached build and prints its path at once.
#
# Why: btr's recorder is a QEMU TCG plugin, and some distributions ship a
# qemu-user that cannot load plugins (Debian 13's is a static build).  The
# make targets run this only when no plugin-capable qemu-x86_64 is found
# (scripts/need-qemu.sh), or when asked to (`make qemu`, BTR_BUILD_QEMU=1).
#
# Usage: scripts/build-qemu.sh [--force]   builds unless cached; prints the path
#        scripts/build-qemu.sh --cached    prints the cached one's path, or nothing
#        scripts/build-qemu.sh --if-needed nothing when the system has a qemu-x86_64
#                                          that loads plugins; else as without option
# Env:   BTR_QEMU_SUITE  the Debian suite whose source package is built
#                        (default trixie: QEMU 10, plugin API v4)
#        JOBS            parallel compile jobs (default 1: a shared machine)
# Needs root (or sudo) only the first time, to add the deb-src line and
# install the build dependencies with apt-get; everything comes from the
# package archive already configured in apt's sources (no other download).
set -euo pipefail

force=0 mode=build
case "${1:-}" in
--force) force=1 ;;
--cached) mode=cached ;;
--if-needed) mode=if-needed ;;
"") ;;
*) echo "usage: scripts/build-qemu.sh [--force | --cached | --if-needed]" >&2; exit 2 ;;
esac
suite=${BTR_QEMU_SUITE:-trixie}
cache=${BTR_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/btr}
jobs=${JOBS:-1}

log() { echo "build-qemu: $*" >&2; }
die() { echo "build-qemu: $*" >&2; exit 3; }

# A qemu-x86_64 that can load plugins: dynamically linked (a static one
# cannot dlopen) and exporting the plugin API.  btr itself then checks that
# it loads btr's plugin (`btr info`).
plugin_capable() {
  [ -x "$1" ] || return 1
  local ph syms
  ph=$(readelf -lW "$1" 2>/dev/null) || return 1
  syms=$(readelf --dyn-syms -W "$1" 2>/dev/null) || return 1
  case "$ph" in *"Requesting program interpreter"*) ;; *) return 1 ;; esac
  case "$syms" in *" qemu_plugin_register_vcpu_tb_trans_cb"*) return 0 ;; esac
  return 1
}
if [ "$mode" = if-needed ]; then
  for q in "$(command -v qemu-x86_64 || true)" /usr/bin/qemu-x86_64; do
    [ -n "$q" ] && plugin_capable "$q" && exit 0
  done
fi

# What this script does to a source package; a cached build made another
# way is built again.
recipe=4
# A complete build of any version is good enough unless --force: building
# is minutes, looking it up must be instant (and work offline).
if [ "$force" = 0 ]; then
  for d in $(ls -d "$cache"/qemu-*/ 2>/dev/null | sort -rV); do
    if [ "$(cat "$d/complete" 2>/dev/null)" = "recipe $recipe" ] && [ -x "$d/bin/qemu-x86_64" ]; then
      echo "${d%/}/bin/qemu-x86_64"
      exit 0
    fi
  done
fi
[ "$mode" = cached ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# --- apt sources: the suite's deb-src line (and, on bookworm, backports for
# meson >= 1.5, which QEMU 10 needs).  The archive's address is taken from the
# sources the machine already uses, so a local mirror keeps working.
. /etc/os-release
codename=${VERSION_CODENAME:-}
uri=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  u=$(awk '/^URIs:/ {print $2; exit}' "$f")
  case "$u" in */debian|*/debian/) uri=${u%/}; break ;; esac
done
if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
  uri=$(awk '$1 == "deb" && $2 !~ /security/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list || true)
  uri=${uri%/}
fi
[ -n "$uri" ] || die "no Debian archive in apt's sources (needed for the qemu source package)"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
list=/etc/apt/sources.list.d/btr-qemu-build.sources
want="# Added by btr's scripts/build-qemu.sh: QEMU source package and its build tools.
Types: deb-src
URIs: $uri
Suites: $suite
Components: main
Signed-By: $keyring"
backports=""
if [ "$codename" = bookworm ]; then
  backports="bookworm-backports"
  want="$want

Types: deb
URIs: $uri
Suites: $backports
Components: main
Signed-By: $keyring"
fi
if [ "$(cat "$list" 2>/dev/null)" != "$want" ]; then
  log "adding $list ($suite sources${backports:+, $backports})"
  printf '%s\n' "$want" | $SUDO tee "$list" >/dev/null
  $SUDO apt-get update -q >&2
elif [ -z "$(apt-cache showsrc qemu 2>/dev/null | awk '/^Version:/ {print; exit}')" ]; then
  $SUDO apt-get update -q >&2
fi

# --- build dependencies for x86_64-linux-user only (not `apt-get build-dep`:
# the whole package's list pulls in hundreds of packages for system emulators)
deps="build-essential dpkg-dev pkg-config ninja-build python3 python3-venv libglib2.0-dev zlib1g-dev flex bison"
missing=""
for p in $deps; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# shellcheck disable=SC2086
[ -z "$missing" ] || $SUDO apt-get install -y -q --no-install-recommends $missing >&2
if [ -n "$backports" ]; then
  have=$(dpkg-query -W -f='${Version}' meson 2>/dev/null || true)
  if [ -z "$have" ] || dpkg --compare-versions "$have" lt 1.5; then
    $SUDO apt-get install -y -q --no-install-recommends -t "$backports" meson python3-pycotap >&2
  fi
  dpkg-query -W -f='${Status}' python3-pycotap 2>/dev/null | grep -q "install ok installed" ||
    $SUDO apt-get install -y -q --no-install-recommends -t "$backports" python3-pycotap >&2
else
  for p in meson python3-pycotap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      $SUDO apt-get install -y -q --no-install-recommends "$p" >&2
  done
fi

# --- the source package
version=$(apt-cache showsrc "qemu/$suite" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -rV | head -1 || true)
[ -n "$version" ] || version=$(apt-cache showsrc qemu | awk '/^Version:/ {print $2}' | sort -rV | head -1)
[ -n "$version" ] || die "apt-cache showsrc qemu: no source package (is the deb-src line in $list reachable?)"
key=${version#*:}
prefix="$cache/qemu-$key"
if [ "$force" = 0 ] && [ "$(cat "$prefix/complete" 2>/dev/null)" = "recipe $recipe" ] &&
  [ -x "$prefix/bin/qemu-x86_64" ]; then
  echo "$prefix/bin/qemu-x86_64"
  exit 0
fi
work="$cache/src-$key"
rm -rf "$prefix"
# An interrupted build of the same recipe goes on where it stopped.
if [ "$(cat "$work/configured" 2>/dev/null)" != "recipe $recipe" ]; then
  rm -rf "$work"
  mkdir -p "$work"
  log "fetching qemu $version source ($suite)"
  (cd "$work" && apt-get source -q -o APT::Sandbox::User=root "qemu=$version" >&2)
fi
srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'qemu-*' | head -1)
[ -n "$srcdir" ] || die "apt-get source qemu=$version unpacked nothing in $work"

# --- the user-mode plugin functions.  QEMU 10.0's linux-user/meson.build
# adds plugin-api.c (qemu_plugin_path_to_binary, qemu_plugin_start_code,
# _end_code, _entry_code) "when: 'CONFIG_TCG_PLUGINS'", a name no part of
# the 10.0 build sets (the option is CONFIG_PLUGIN, a host setting that the
# per-target source sets do not see), so the functions are declared in
# qemu-plugin.h and listed for export but never compiled.  Added the way
# plugins/meson.build adds its user-mode files: under get_option('plugins').
# (btr's plugin does without them, agents/qemu/qemu_user_api.c; tools that
# call them need them.)  A source that already builds the file is left alone.
mb="$srcdir/linux-user/meson.build"
if grep -q "when: 'CONFIG_TCG_PLUGINS', if_true: files('plugin-api.c')" "$mb"; then
  log "patching $mb: build plugin-api.c when plugins are enabled"
  sed -i "s|^linux_user_ss.add(when: 'CONFIG_TCG_PLUGINS', if_true: files('plugin-api.c'))\$|if get_option('plugins')\n  linux_user_ss.add(files('plugin-api.c'))\nendif|" "$mb"
  grep -q "^  linux_user_ss.add(files('plugin-api.c'))" "$mb" || die "cannot patch $mb (source kept in $work)"
fi
# ... and the file, never compiled in 10.0, does not compile as it is: it
# reads bprm->filename, and struct linux_binprm is declared in
# linux-user/loader.h, which it does not include.
pa="$srcdir/linux-user/plugin-api.c"
if [ -f "$pa" ] && ! grep -q '^#include "loader.h"' "$pa"; then
  sed -i 's|^#include "qemu.h"$|#include "qemu.h"\n#include "loader.h"|' "$pa"
  grep -q '^#include "loader.h"' "$pa" || die "cannot patch $pa (source kept in $work)"
fi

# --- configure and build only what btr uses (the system's python3, which
# sees the meson installed above: QEMU's configure would otherwise try to
# download one into its venv)
log "building x86_64-linux-user with plugins ($jobs job(s); takes minutes)"
start=$(date +%s)
mkdir -p "$srcdir/b"
[ "$(cat "$work/configured" 2>/dev/null)" = "recipe $recipe" ] ||
(cd "$srcdir/b" &&
  ../configure --python=/usr/bin/python3 --prefix="$prefix" --target-list=x86_64-linux-user \
    --enable-plugins --disable-install-blobs --disable-docs --disable-tools \
    --disable-werror --disable-debug-info >&2 &&
  echo "recipe $recipe" > "$work/configured") ||
  die "configure failed; its log is above (source kept in $work)"
(cd "$srcdir/b" && nice make -j"$jobs" qemu-x86_64 >&2) ||
  die "the build failed; its log is above (source kept in $work; run again to go on)"
mkdir -p "$prefix/bin" "$prefix/include"
cp "$srcdir/b/qemu-x86_64" "$prefix/bin/qemu-x86_64"
strip "$prefix/bin/qemu-x86_64" 2>/dev/null || true
cp "$srcdir/include/qemu/qemu-plugin.h" "$prefix/include/"
"$prefix/bin/qemu-x86_64" --version | head -1 > "$prefix/version"
echo "$version" > "$prefix/source-version"
# The user-mode plugin functions must be exported (the patch above): a
# build without them loads btr's plugin, but plugins that call them fail.
syms=$(nm -D --defined-only "$prefix/bin/qemu-x86_64")
for f in qemu_plugin_register_vcpu_tb_trans_cb qemu_plugin_path_to_binary qemu_plugin_start_code; do
  case "$syms" in
  *" $f"*) ;;
  *) die "QEMU $version's qemu-x86_64 does not export $f (not cached; source kept in $work)" ;;
  esac
done
echo "recipe $recipe" > "$prefix/complete"
rm -rf "$work"
log "done in $(( $(date +%s) - start )) s: $prefix/bin/qemu-x86_64 ($(du -sh "$prefix/bin/qemu-x86_64" | cut -f1))"
echo "$prefix/bin/qemu-x86_64"
