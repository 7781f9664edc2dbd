#!/bin/bash
# The tracked tree holds five trained checkpoints (~17 MB each; train/checkpoints/run10, run12, run14, run15, run16),
# more than a GPU call carries beside a packed build and the packed texts (64 MiB in all). Park the
# checkpoints a call does not read, and the raw results under bench/results, outside the working tree, and bring
# them back afterwards:
#   bash bench/park_checkpoints.sh keep run14     (every other train/checkpoints/* to /tmp/okv_parked)
#   bash bench/park_checkpoints.sh back           (all of them back; git status is clean again)
set -eu
cd "$(dirname "$0")/.."
P=/tmp/okv_parked
case "${1:-}" in
  keep)
    shift
    mkdir -p $P
    for d in train/checkpoints/*/; do
      n=$(basename "$d")
      keep=0
      for k in "$@"; do [ "$n" = "$k" ] && keep=1; done
      [ $keep = 1 ] || { [ -e "$P/$n" ] && { echo "$P/$n exists: bring it back first"; exit 1; }; mv "$d" "$P/$n"; }
    done
    # the raw result files (bench/results, ~16 MB) are read by no GPU call either
    [ -e $P/results ] || mv bench/results $P/results
    echo "parked: $(ls $P | tr "\n" " ")" ;;
  back)
    [ -d $P ] || { echo "nothing parked"; exit 0; }
    if [ -e $P/results ]; then   # results written while parked (bench/results/gpu_sNN) join the parked ones
      [ -d bench/results ] && cp -rn bench/results/. $P/results/ && rm -rf bench/results
      mv $P/results bench/results
    fi
    for d in $P/*; do [ -e "$d" ] || continue; mv "$d" train/checkpoints/; done
    rmdir $P; git status --short train/checkpoints | head -3 ;;
  *) echo "usage: park_checkpoints.sh keep NAME... | back"; exit 2 ;;
esac
