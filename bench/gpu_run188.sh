#!/bin/bash
# Session 44 of 2026-12-07: training run 19 = run 16's call (run 15 trained on for one call at its last phase,
# bench/gpu_run171.sh's defaults) with 2.6 times the haystack text: beside the Python and Perl manuals and
# docstrings (9.5 MB), the Linux man-pages project (manpages, manpages-dev: 3.6 MB) and the kernel's documentation
# (linux-doc-6.1: 11.5 MB), `train/make_texts.py --docs=require --extra=man,kernel` (24.6 MB). Runs 16-18 (251,
# 245, 252 of 280 at 32K dense) lose their points on haystack text they never saw while their training batches
# are exact (vt 0.87-0.99): a 7.3M model that has the 9.5 MB by heart (copy loss ~0.8 nats) reads novel text as
# the distraction it is. Same start, rate and weights as run 16, so the two compare; run 15's 1,279 s of training
# plus this call's ~350 s stays within the 30 minutes.
#   python3 train/make_texts.py /tmp/tx --docs=require --extra=man,kernel
#   tar -C /tmp/tx -cJf build-texts/okv_texts.tar.xz train heldout
#   bash bench/park_checkpoints.sh keep run15; bash bench/gpu_run188.sh
#   (carry build-gc and build-texts; $OUT/r/{target,draft.tar}, dense32k.json, la.tgz, train.log)
export M=${M:-train/checkpoints/run15} BUDGET=${BUDGET:-400}
exec bash bench/gpu_run171.sh
