#!/bin/bash
# Prepare, on a machine without a GPU, the two builds a GPU visit carries: a debug build
# with the tests (run-all's suites, fault.sh's gpu-faults module) and a release build (the
# benchmarks), both -Dhip=enabled -Dhip_platform=nvidia, of the committed tree (a snapshot
# under /tmp, so that edits made while the visit runs do not leak into it), with the
# shared objects the GPU host lacks copied into BUILD/lib and the user-module fatbins
# (names.cu, launch-attrs.cu, user-kernels.cu) built by nvcc into the release build.
# Usage: tests/gpu/prepare.sh [REV] [DEBUG_DIR] [RELEASE_DIR]
#   (defaults HEAD build-gpud build-gpur; then carry both and run tests/gpu/visit.sh)
set -euo pipefail
rev=${1:-HEAD} D=${2:-build-gpud} R=${3:-build-gpur}
src=/tmp/sseq-gpu-src-$(git rev-parse --short "$rev")
rm -rf "$src" "$D" "$R"
mkdir -p "$src"
git archive "$rev" | tar x -C "$src"
meson setup "$D" "$src" -Dhip=enabled -Dhip_platform=nvidia >/dev/null
meson setup "$R" "$src" -Dhip=enabled -Dhip_platform=nvidia --buildtype=release -Ddebug=true \
	-Dtests=false >/dev/null
ninja -C "$D" >/dev/null
ninja -C "$R" >/dev/null
for b in "$D" "$R"; do
	mkdir -p "$b/lib"
	cp /usr/lib/x86_64-linux-gnu/{libuv.so.1,libprotobuf-c.so.1,libsubunit.so.0} "$b/lib/"
done
for m in names launch-attrs user-kernels; do
	nvcc -fatbin -arch=sm_90 -o "$R/$m.fatbin" "tests/gpu/$m.cu"
done
# What the visit does not run, to stay within what one call may carry (64 MiB).
rm -f "$R"/bench/bench-roundtrip-native "$R"/bench/bench-roundtrip-threads "$R"/bench/*.so
du -sh "$D" "$R"
