#!/bin/bash
# Lineage C continuation stages on the lent GPU, two members sharing it (docs/training.md items 22-23):
#   training/lineage_c_pair.sh BUDGET_S 'NAME INIT SEED MIX [flags]' 'NAME INIT SEED MIX [flags]'
# Each member continues INIT (a checkpoint folder) for BUDGET_S seconds of training on fresh data of
# SEED at the category MIX (single,multi,oos,missing,chat), with lineage C's continuation recipe
# (training/lineage_c.sh: its data flags, --lr 1.2e-3 --warmup 100 --first-weight 4 --n-train 120000)
# and --round5 0.5; [flags] go to training.train after those. Each member's float8 weights stay in
# /tmp/NAME_8 on the device, so a follow-up call on the still-warm machine can continue from there,
# and come back under $OUT in 15M parts (NAME.fp8.part-*) with meta_NAME.tgz (log, train log, eval,
# curve). At home: cat NAME.fp8.part-* > DIR/model.safetensors; cp training/lineage/c/*.json DIR/.
# RECIPE=spine instead continues a stage-19-sized model with stage 19's member recipe: --lr 7e-4,
# no dropout, first-token weight 1, no compose and no round 5 unless [flags] add them (give MIX as
# stage 19's 0.4,0.22,0.1,0.08,0.2); it returns the float16 weights as NAME.part-*, and the run
# folder /tmp/run_NAME/model stays on the device for a follow-up --init. It also scores each member
# and the soup of them all (plus SOUP_WITH's folders) on training.heldout's guide by teacher
# forcing, and returns the results as guide_NAME.json and guide_soup.json (GUIDE_N requests, 1200
# unless set; a smaller GUIDE_N makes a CPU dry run of this script quick). Session 39's first call:
#   RECIPE=spine training/lineage_c_pair.sh 470 \
#       'r6a models/spine 501 0.4,0.22,0.1,0.08,0.2 --round5 0.5 --round6 0.4' \
#       'r6b models/spine 503 0.4,0.22,0.1,0.08,0.2 --round6 0.5'
# Session 38's c6, stage 19's refusal mix beside round 6 (neither call found a machine):
#   training/lineage_c_pair.sh 480 'c6a training/lineage/c 481 0.30,0.18,0.12,0.22,0.18' \
#       'c6b training/lineage/c 483 0.34,0.22,0.12,0.16,0.16 --round6 0.4'
# and at once on the warm machine, c7 from each c6:
#   training/lineage_c_pair.sh 480 'c7a /tmp/c6a_8 491 0.30,0.18,0.12,0.22,0.18' \
#       'c7b /tmp/c6b_8 493 0.34,0.22,0.12,0.16,0.16 --round6 0.4'
set -uo pipefail  # not -e: one member's failure must not lose the other's weights
budget=$1; shift
out=${OUT:?set OUT, the folder whose files come back}
common=(--steps 0 --time-budget "$budget" --warmup 100 --n-train 120000 --max-len 1536 --noise 0.6
        --phrase 0.8 --context 0.3 --front 0.3 --synth 0.75 --no-preflight --eval-limit 5 --val-eval 0
        --val-every 200)
if [ "${RECIPE:-c}" = spine ]; then
    # stage 19's own continuation recipe (training/reproduce.sh's member stages); weights stay float16
    recipe=("${common[@]}" --lr 7e-4)
else
    recipe=("${common[@]}" --lr 1.2e-3 --first-weight 4 --compose 0.35 --resid-dropout 0.1 --round5 0.5)
fi

member() {  # member NAME INIT SEED MIX [flags]
    local n=$1 init=$2 seed=$3 mix=$4 run=/tmp/run_$1
    shift 4
    # the time budget bounds the training loop only; data and the final save take about a minute more
    timeout $((budget + 100)) python -m training.train --out "$run" --init "$init" --seed "$seed" \
        --mix "$mix" "${recipe[@]}" "$@" > /tmp/log_$n.txt 2>&1
    if [ "${RECIPE:-c}" = spine ]; then
        split -b 15M "$run"/model/model.safetensors "$out/$n.part-"
    else
        python -m training.fp8 --init "$run"/model --out /tmp/${n}_8 >> /tmp/log_$n.txt 2>&1 &&
            split -b 15M /tmp/${n}_8/model.safetensors "$out/$n.fp8.part-"
    fi
    cp /tmp/log_$n.txt "$run"/
    tar -C "$run" -czf "$out/meta_$n.tgz" log_$n.txt train_log.jsonl eval.json loss.png 2>/dev/null
}

guide() {  # guide NAME MODEL_DIR: the held-out guide by teacher forcing (float32), seconds on the GPU
    python -m training.evaluate --model "$2" --data /tmp/guide --split val --category single --forced \
        --out "$out/guide_$1.json" > /tmp/guide_$1.txt 2>&1 &&
        python -c 'import json, sys; c = json.load(open(sys.argv[1]))["by_category"]["single"]
print("guide", sys.argv[2], c["exact"], "of", c["n"], "median margin", c["median_margin"])' "$out/guide_$1.json" "$1" ||
        tail -n 3 /tmp/guide_$1.txt
}

for spec in "$@"; do
    # shellcheck disable=SC2086  # each spec is split into its words on purpose
    member $spec &
done
if [ "${RECIPE:-c}" = spine ]; then  # the guide's requests, beside training: seconds
    python -m training.heldout --out /tmp/guide --n "${GUIDE_N:-1200}" > /dev/null
fi
wait
for spec in "$@"; do
    tail -n 2 "/tmp/log_${spec%% *}.txt"
done
if [ "${RECIPE:-c}" = spine ]; then
    # each member and their uniform soup (with SOUP_WITH's folders, e.g. an earlier call's
    # /tmp/run_NAME/model on this warm machine) on the guide, so choices need no CPU runs at home
    soup=()
    for spec in "$@"; do
        n=${spec%% *}
        if [ -f /tmp/run_$n/model/model.safetensors ]; then
            guide "$n" /tmp/run_$n/model
            soup+=(/tmp/run_$n/model)
        fi
    done
    # shellcheck disable=SC2206  # SOUP_WITH is a space-separated list of folders
    soup+=(${SOUP_WITH:-})
    if [ ${#soup[@]} -gt 1 ]; then
        python -m training.soup --out /tmp/soup_call "${soup[@]}" > /tmp/guide_soup.txt 2>&1 &&
            guide soup /tmp/soup_call/model || tail -n 3 /tmp/guide_soup.txt
    fi
fi
ls -la "$out"
