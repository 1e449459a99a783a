#!/bin/bash
# Retrain the shipped default model (models/spine) from nothing, in one command:
#   training/reproduce.sh OUTDIR
# Nineteen stages, each continuing the previous one's checkpoint, as docs/training.md lists
# them; the last is the mean of four short runs from stage 18 (training.soup). Each stage runs the training code of the commit it was trained with (checked out
# as a git worktree under OUTDIR), since the data generator grew between stages. Needs
# a CUDA GPU (about 60 minutes on one H200) and the packages of requirements-test.txt.
# A stage whose checkpoint exists is skipped, so an interrupted run picks up where it
# stopped. Stages 3-4, 6-8, 10-18 and stage 19's runs ran with time budgets; here they run the step counts those
# budgets gave. GPU kernels are not bit-deterministic: expect the same figures within
# run-to-run noise, not the same bytes.
set -euo pipefail
out=$(realpath -m "${1:?usage: training/reproduce.sh OUTDIR}")
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
mkdir -p "$out"

step() {  # step N COMMIT MODULE [flags]: python -m MODULE --out OUT/N with the code of COMMIT
    local n=$1 commit=$2 module=$3 tree="$out/src-$2"
    shift 3
    if [ -d "$out/$n/model" ]; then
        echo "stage $n: $out/$n/model exists, skipped"
        return
    fi
    [ -d "$tree" ] || git -C "$repo" worktree add --detach "$tree" "$commit" > /dev/null
    echo "stage $n: $module with the code of $commit"
    (cd "$tree" && python -m "$module" --out "$out/$n" "$@")
}
stage() { step "$1" "$2" training.train "${@:3}"; }  # stage N COMMIT [training.train flags]
# transplant N COMMIT FROM: FROM's layers on a bare tokenizer (training.transplant)
transplant() { step "$1" "$2" training.transplant --init "$3" --seed 9 --style bare; }

stage 1 c45ceb6 --seed 0 --steps 3200 --no-copy-drill
stage 2 c45ceb6 --seed 1 --init "$out/1/model" --steps 2000 --lr 1e-3 --warmup 50 --n-train 60000 \
    --val-every 500 --no-preflight
stage 3 5452dcb --seed 2 --init "$out/2/model" --steps 2224 --lr 2e-3 --warmup 100 --n-train 200000 --no-preflight
stage 4 5452dcb --seed 3 --init "$out/3/model" --steps 2868 --lr 1.5e-3 --warmup 100 --n-train 200000 --no-preflight
stage 5 5452dcb --seed 4 --init "$out/4/model" --steps 4600 --lr 1e-3 --warmup 100 --n-train 200000 --no-preflight
stage 6 775a01c --seed 5 --init "$out/5/model" --steps 1863 --lr 1.5e-3 --warmup 100 --noise 0.5 --no-preflight
stage 7 d83d023 --seed 6 --init "$out/6/model" --steps 1492 --lr 1e-3 --warmup 100 --noise 0.5 --phrase 0.5 \
    --context 0.15 --front 0.15 --synth 0.75 --no-preflight
stage 8 51e685c --seed 7 --init "$out/7/model" --steps 1794 --lr 1e-3 --warmup 100 --noise 0.6 --phrase 0.8 \
    --context 0.3 --front 0.3 --synth 0.75 --no-preflight
# stage 9: stage 8's layers on a bare tokenizer (spaces apart from words), then three stages on it
transplant 9 fa16105 "$out/8/model"
drills=(--max-len 1536 --warmup 100 --noise 0.6 --phrase 0.8 --context 0.3 --front 0.3 --synth 0.75 --no-preflight)
stage 10 fa16105 --seed 10 --init "$out/9/model" --steps 1332 --lr 2e-3 "${drills[@]}"
stage 11 fa16105 --seed 13 --init "$out/10/model" --steps 1820 --lr 1.5e-3 "${drills[@]}" \
    --mix 0.38,0.30,0.12,0.08,0.12
# stage 12: 223 out-of-scope kinds, 14 train-only structures per tool
stage 12 6b31879 --seed 14 --init "$out/11/model" --steps 2165 --lr 1e-3 "${drills[@]}" \
    --mix 0.45,0.25,0.12,0.06,0.12
# stage 13: 253 more train-only structures (span edges, negations), boundary-stress values
stage 13 18740e5 --seed 15 --init "$out/12/model" --steps 1717 --lr 1e-3 "${drills[@]}"
# stage 14: stage 13 with chat back to 24% of the exchanges (session 6's wA)
stage 14 18740e5 --seed 17 --init "$out/13/model" --steps 1991 --lr 1e-3 "${drills[@]}" \
    --mix 0.36,0.20,0.10,0.10,0.24
# stages 15-16: round 2 of train-only data (span edges, unseen verbs, terse chat, three-call share 35%)
stage 15 e29bda6 --seed 21 --init "$out/14/model" --steps 1366 --lr 1e-3 "${drills[@]}" \
    --mix 0.36,0.20,0.10,0.10,0.24
stage 16 77edeeb --seed 23 --init "$out/15/model" --steps 1450 --lr 1e-3 "${drills[@]}" \
    --mix 0.34,0.26,0.10,0.08,0.22
# stage 17: round 3 (label-free timers, negative-worded do-not-disturb, recipients after openers, ...)
stage 17 e21405a --seed 25 --init "$out/16/model" --steps 1243 --lr 7e-4 "${drills[@]}" \
    --mix 0.40,0.22,0.10,0.08,0.20
# stage 18: stage 17 on round 4 (span edges on unfamiliar values, new verbs, polarity wordings, joins),
# with the retired validation structures training too; chosen on the fresh validation split (session 8's tD)
stage 18 2aca9fc --seed 39 --init "$out/17/model" --steps 1775 --lr 1e-3 "${drills[@]}" \
    --mix 0.40,0.22,0.10,0.08,0.20
# stage 19: a uniform soup of four short runs from stage 18 on their own draws: 19a is round 4 as in
# stage 18 (session 8's uA), 19b-d add composed requests (training/compose.py) at three shares
# (session 9's vB, vC, vD); chosen on the fresh validation split, where it beat every member
member() { stage "19$1" "$2" --seed "$3" --init "$out/18/model" --steps "$4" --lr 7e-4 "${drills[@]}" \
    --mix 0.40,0.22,0.10,0.08,0.20 "${@:5}"; }
member a da45d2e 41 1614
member b 18872a9 53 941 --compose 0.35
member c 18872a9 55 929 --compose 0.5
member d 18872a9 57 945 --compose 0.7
step 19 0ef6bad training.soup "$out"/19a/model "$out"/19b/model "$out"/19c/model "$out"/19d/model
echo "the checkpoint: $out/19/model (models/spine ships it, plus the probe: benchmarks/routing_quality.py --write-probe)"
