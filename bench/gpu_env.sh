# Sourced by the GPU run scripts: load the shared libraries the GPU machine lacks
# from BUILD/lib (carried with the build), and set the paths the programs use.
#   . bench/gpu_env.sh BUILD_DIR
B=${1:-build-gpu}
# a packed carry (bench/make_carry.sh): unpack it once (tar -m: the files get the time of unpacking, newer
# than the archive), under a lock, since two scripts of one call may source this at the same moment
# (session 33 lost a cell to one process rewriting the binary while the other ran it)
okv_unpack_needed() { [ -f "$B/build.tar.xz" ] && { [ ! -x "$B/oasiskv" ] || [ "$B/build.tar.xz" -nt "$B/oasiskv" ]; }; }
if okv_unpack_needed; then
  if command -v flock >/dev/null; then
    (flock 9; okv_unpack_needed && tar -C "$B" -mxJf "$B/build.tar.xz") 9>"$B/.unpack.lock"
  else
    tar -C "$B" -mxJf "$B/build.tar.xz"
  fi
fi
OUT=${OUT:-/tmp/okv_out}
mkdir -p "$OUT" /tmp/okvlib
for f in "$B"/lib/*; do
  n=$(basename "$f")
  ldconfig -p | awk '{print $1}' | grep -qx "$n" || cp -L "$f" /tmp/okvlib/
done
export LD_LIBRARY_PATH=/tmp/okvlib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OKV_SOURCE_DIR=$PWD
