#!/bin/bash
# One GPU stage of the default model, as run on the lent H200 (see docs/training.md):
#   training/device_stage.sh OUTDIR INIT SEED BUDGET_S LR [more training.train flags]
# Trains from INIT ("-": from scratch) on fresh data of SEED for BUDGET_S seconds, evaluates on validation
# and test, and leaves the log, the evaluations, the curve and the checkpoint (a tar
# cut into 12 MB parts, the device returns files of at most 16 MiB) in OUTDIR.
# With BASELINE=DIR set, that checkpoint is evaluated on the same validation and test
# data too (baseline_val.json, baseline_test.json), for a like-for-like comparison;
# BASELINE_TEST=0 scores it on validation only (~100 s less, for sweeps near the time limit).
# With TEST0=1 the new checkpoint is also scored on the published seed-0 test split
# (test0.json, baseline_test0.json) instead of this seed's test draw.
# PART_SIZE (default 12M) sets the size of the checkpoint's tar parts (a 16-block model: 15M, three parts).
set -euo pipefail
outdir=$1; init=$2; seed=$3; budget=$4; lr=$5; shift 5
run=$(mktemp -d)
from=(--init "$init"); [ "$init" = "-" ] && from=()  # INIT "-": from scratch, with a new tokenizer
python -m training.train --seed "$seed" "${from[@]}" --out "$run" --steps 0 --time-budget "$budget" \
    --lr "$lr" --warmup 100 --no-preflight "$@"
if [ -n "${BASELINE:-}" ]; then
    python -m training.evaluate --model "$BASELINE" --data "$run"/data --split val --limit 800 \
        --out "$outdir"/baseline_val.json > /dev/null  # the same 800 as the stage's own val_eval
    if [ -z "${TEST0:-}" ] && [ "${BASELINE_TEST:-1}" != 0 ]; then
        python -m training.evaluate --model "$BASELINE" --data "$run"/data --split test \
            --out "$outdir"/baseline_test.json > /dev/null
    fi
fi
if [ -n "${TEST0:-}" ]; then  # also score the published test split (seed 0, docs/training.md)
    python -m training.datagen --out "$run"/data0 --seed 0 --train 10 --val 10 > /dev/null
    python -m training.evaluate --model "$run"/model --data "$run"/data0 --split test \
        --out "$outdir"/test0.json > /dev/null
    if [ -n "${BASELINE:-}" ]; then
        python -m training.evaluate --model "$BASELINE" --data "$run"/data0 --split test \
            --out "$outdir"/baseline_test0.json > /dev/null
    fi
fi
cp "$run"/train_log.jsonl "$run"/eval.json "$run"/loss.png "$outdir"/
[ -e "$run"/val_eval.json ] && cp "$run"/val_eval.json "$outdir"/  # absent with --val-eval 0
tar -C "$run" -czf - model | split -b "${PART_SIZE:-12M}" - "$outdir"/model.tgz.part-
