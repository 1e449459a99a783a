#!/bin/bash
# Several GPU stages side by side, one per GPU, as run on the lent H200s (with fewer GPUs
# than specs they share GPUs round-robin; the default model is small enough that two
# stages on one H200 each keep most of their step rate):
#   training/device_sweep.sh OUTDIR KEEP 'NAME INIT SEED BUDGET_S LR [flags]' ...
# Each quoted spec runs training/device_stage.sh on its own GPU (the first one also
# scores $BASELINE when set). Afterwards the KEEP variants with the most exact answers
# on validation keep their checkpoints; every log and evaluation goes into one
# results.tgz, since the device returns at most 8 files.
# With SOUP=1 the mean of every run's checkpoint (training.soup) is made there too, scored
# on the seed-0 validation split of SOUP_VAL (800) conversations with training.evaluate's
# --limit (at most a fifth per category: 625 of them at 800; soup/val_eval.json) and always
# kept: a checkpoint is two files, so KEEP 2 leaves room for it. It adds about 90 s.
# With SOUP_BASELINE=DIR as well, that checkpoint is scored on the very same seed-0 validation
# conversations, on the device, while the runs train (baseline0/val_eval.json), so the soup
# is compared with it like for like (same data, same dtype, same batches).
# With SOUP_MEMBERS=1 every member is scored on those conversations too (NAME/val0_eval.json;
# the ranking uses it for runs without their own val_eval.json, e.g. with --val-eval 0).
# A member trained earlier joins the soup when its model.tgz.part-* are placed in
# OUTDIR/NAME/ before the sweep starts.
set -uo pipefail
outdir=$1; keep=$2; shift 2
base0_pid=""
if [ -n "${SOUP:-}" ] && [ -n "${SOUP_BASELINE:-}" ]; then
    mkdir -p "$outdir/baseline0"; base0_tmp=$(mktemp -d)
    (python -m training.datagen --out "$base0_tmp/data0" --seed 0 --train 10 --val "${SOUP_VAL:-800}" > /dev/null &&
        python -m training.evaluate --model "$SOUP_BASELINE" --data "$base0_tmp/data0" --split val \
            --limit "${SOUP_VAL:-800}" --out "$outdir/baseline0/val_eval.json" > "$outdir/baseline0/eval.log" 2>&1) &
    base0_pid=$!
fi
gpu=0
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || true
[ "${ngpu:-0}" -ge 1 ] || ngpu=1
for spec in "$@"; do
    read -r name init seed budget lr flags <<< "$spec"
    mkdir -p "$outdir/$name"
    base=""; [ $gpu -eq 0 ] && base=${BASELINE:-}
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=$((gpu % ngpu)) BASELINE=$base bash training/device_stage.sh "$outdir/$name" "$init" "$seed" \
        "$budget" "$lr" $flags > "$outdir/$name/stage.log" 2>&1 &
    gpu=$((gpu + 1))
done
wait
if [ -n "${SOUP:-}" ]; then
    [ -n "$base0_pid" ] && echo "$SOUP_BASELINE" > "$outdir/baseline0/model.txt"
    members=(); soup_tmp=$(mktemp -d); n_val=${SOUP_VAL:-800}
    mkdir -p "$outdir/soup"
    for d in "$outdir"/*/; do
        parts=("$d"model.tgz.part-*)
        [ -e "${parts[0]}" ] || continue
        name=$(basename "$d")
        if mkdir -p "$soup_tmp/$name" && cat "${parts[@]}" | tar -xzf - -C "$soup_tmp/$name"; then
            members+=("$soup_tmp/$name/model") && echo "$name" >> "$outdir/soup/members.txt"
        fi
    done
    if python -m training.soup --out "$soup_tmp/soup" "${members[@]}" > "$outdir/soup/soup.log" 2>&1; then
        python -m training.datagen --out "$soup_tmp/data0" --seed 0 --train 10 --val "$n_val" > /dev/null
        if [ -n "${SOUP_MEMBERS:-}" ]; then  # each member on the soup's conversations too, alongside it
            for m in "${members[@]}"; do
                name=$(basename "$(dirname "$m")")
                python -m training.evaluate --model "$m" --data "$soup_tmp/data0" --split val \
                    --limit "$n_val" --out "$outdir/$name/val0_eval.json" > /dev/null &
            done
        fi
        python -m training.evaluate --model "$soup_tmp/soup/model" --data "$soup_tmp/data0" --split val \
            --limit "$n_val" --out "$outdir/soup/val_eval.json" > /dev/null
        wait
        tar -C "$soup_tmp/soup" -czf - model | split -b 12M - "$outdir/soup/model.tgz.part-"
    fi
    rm -rf "$soup_tmp"
fi
python3 - "$outdir" "$keep" <<'EOF'
import json, pathlib, sys
out, keep = pathlib.Path(sys.argv[1]), int(sys.argv[2])
score = {}
for d in sorted(p for p in out.iterdir() if p.is_dir()):
    try:
        f = d / "val_eval.json"
        ev = json.loads((f if f.exists() else d / "val0_eval.json").read_text())["by_category"]
        score[d.name] = sum(c["exact"] for c in ev.values())
    except (OSError, KeyError, ValueError):
        score[d.name] = -1
ranked = sorted(score, key=score.get, reverse=True)
print("validation exact:", {k: score[k] for k in ranked}, "(soup, baseline0: the seed-0 draw, the rest their own)")
for name in [n for n in ranked if n not in ("soup", "baseline0")][keep:]:
    for part in (out / name).glob("model.tgz.part-*"):
        part.unlink()
(out / "ranking.json").write_text(json.dumps({k: score[k] for k in ranked}))
EOF
cd "$outdir" && tar -czf results.tgz --exclude='model.tgz.part-*' ./*/ ranking.json && \
    find . -mindepth 2 ! -name 'model.tgz.part-*' -type f -delete
