# Sourced (not run) by the GPU training calls' scripts (bench/gpu_run168.sh, gpu_run169.sh, gpu_run171.sh,
# gpu_run172.sh): the packed build's environment (bench/gpu_env.sh build-gc, which sets $B and $OUT),
# unbuffered Python output, and the training texts (train/make_texts.py's output, carried packed as
# build-texts/okv_texts.tar.xz) unpacked into $TX.
. bench/gpu_env.sh build-gc
export PYTHONUNBUFFERED=1
TX=/tmp/okv_texts13
mkdir -p $TX && tar -C $TX -xJf build-texts/okv_texts.tar.xz || { echo "no build-texts/okv_texts.tar.xz"; exit 2; }
