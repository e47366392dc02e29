#!/usr/bin/env bash
# make demo: record the bundled example program and print its report.
set -eu
build=${1:-build}
out=${TMPDIR:-/tmp}/btr-demo.btr
echo "== btr info"
"$build/btr" info || true
echo
echo "== btr record -o $out -- $build/example_demo 20"
"$build/btr" record -o "$out" -- "$build/example_demo" 20
echo
echo "== btr report $out"
"$build/btr" report "$out"
