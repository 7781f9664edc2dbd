#!/bin/bash
# A slim copy of a CUDA build to carry to the GPU machine (the device tool carries at
# most 64 MiB with the tracked tree): the oasiskv command, the CUDA tests and benchmarks
# (stripped), and in lib/ the shared libraries the GPU machine's image lacks, packed into
# OUT/build.tar.xz (xz -9e: its 64 MiB window packs the binaries, which share the CUDA fat binary, ~100 MiB -> a few MiB);
# bench/gpu_env.sh unpacks it there and loads the libraries.
#   bench/make_carry.sh [CUDA build dir, default build-gpu] [out dir, default build-gc]
set -eu
SRC=${1:-build-gpu}; DST=${2:-build-gc}
rm -rf "$DST"; mkdir -p "$DST/tests" "$DST/bench" "$DST/lib"
cp "$SRC/oasiskv" "$DST/"
for t in "$SRC"/tests/test_cuda_* "$SRC"/tests/test_prefix "$SRC"/tests/test_sched "$SRC"/tests/test_dense_room; do [ -x "$t" ] && cp "$t" "$DST/tests/"; done
for b in "$SRC"/bench/cuda_* "$SRC"/bench/bench_step; do [ -x "$b" ] && cp "$b" "$DST/bench/"; done
strip "$DST/oasiskv" $(ls "$DST"/tests/* "$DST"/bench/* 2>/dev/null)
# libraries of the oasiskv command that the GPU machine's image lacks (seen there:
# it has OpenBLAS, PCRE2 and curl, not cJSON or libmicrohttpd and its GnuTLS chain)
ldd "$SRC/oasiskv" | awk '/=> \// {print $3}' |
  grep -E 'libcjson|libmicrohttpd|libgnutls|libhogweed|libnettle|libgmp|libidn2|libunistring|libp11-kit|libtasn1|libffi' |
  while read -r f; do cp -L "$f" "$DST/lib/"; done
XZ_OPT=-9e tar -C "$DST" -cJf "$DST.tar.xz" . && rm -rf "$DST" && mkdir -p "$DST" && mv "$DST.tar.xz" "$DST/build.tar.xz"
du -sh "$DST"
# the device tool carries the tracked tree and the carried paths together, at most 64 MiB
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carry=$(du -sb "$DST" | cut -f1)
echo "tracked tree $((tree >> 20)) MiB + $DST $((carry >> 20)) MiB = $(((tree + carry) >> 20)) MiB of the 64 MiB a call carries"
[ $((tree + carry)) -lt $((62 << 20)) ] || echo "warning: little room left for other carried paths (strip more, or leave tests out)"
