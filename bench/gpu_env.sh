# Sourced by the GPU run scripts: load the shared libraries the GPU machine lacks
# from BUILD/lib (carried with the build), and set the paths the programs use.
#   . bench/gpu_env.sh BUILD_DIR
B=${1:-build-gpu}
# a packed carry (bench/make_carry.sh): unpack it once
if [ -f "$B/build.tar.xz" ] && { [ ! -x "$B/oasiskv" ] || [ "$B/build.tar.xz" -nt "$B/oasiskv" ]; }; then tar -C "$B" -xJf "$B/build.tar.xz"; fi
OUT=${OUT:-/tmp/okv_out}
mkdir -p "$OUT" /tmp/okvlib
for f in "$B"/lib/*; do
  n=$(basename "$f")
  ldconfig -p | awk '{print $1}' | grep -qx "$n" || cp -L "$f" /tmp/okvlib/
done
export LD_LIBRARY_PATH=/tmp/okvlib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OKV_SOURCE_DIR=$PWD
