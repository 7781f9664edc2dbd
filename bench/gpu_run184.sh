#!/bin/bash
# Session 43 of 2026-12-07: training run 18 = run 16 (train/checkpoints/run16) trained on for one call at a lower
# rate, session 37's plan after runs 16 and 17 (bench/ACCURACY.md): at each restart at 1e-3 vt's exact rate in
# 32K training batches fell from ~0.6 to ~0.1 and climbed back (run 17 ended at 245 of 280 dense, below run 16's
# 251), so this call starts at 3e-4 (draft 5e-4) and weighs vt (0.75 -> 1.5) and chain (3 -> 4) up, the two
# families furthest under 90% at 32K (run 16 dense, N = 40: vt 33, chain 32, multi-query 34).
# Same curriculum, texts, copy rows and dense / layer-ahead eval as bench/gpu_run171.sh.
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run184.sh
#   (carry build-gc and build-texts; $OUT/r/{target,draft.tar}, dense32k.json, la.tgz, train.log)
export M=${M:-train/checkpoints/run16} LR=${LR:-3e-4} DLR=${DLR:-5e-4} BUDGET=${BUDGET:-400}
export TW=${TW:-"niah_single_text=1.5,niah_single_filler=0.25,niah_multikey=0.5,niah_multivalue=4,niah_multiquery=2,vt=1.5,qa=2.5,chain=4"}
exec bash bench/gpu_run171.sh
