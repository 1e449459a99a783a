# Sourced by training/lineage_b.sh and lineage_c.sh after `set -euo pipefail`, with $1 the OUTDIR:
# sets out (absolute OUTDIR, created) and repo, and defines worktree and soup.
out=$(realpath -m "${1:?usage: $0 OUTDIR}")
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
mkdir -p "$out"
worktree() {  # worktree COMMIT: that commit's code, checked out once under OUTDIR, as $tree
    [ -d "$out/src-$1" ] || git -C "$repo" worktree add --detach "$out/src-$1" "$1" > /dev/null
    tree="$out/src-$1"
}
soup() {  # soup NAME MEMBER...: the members' mean weights (training/soup.py)
    local n=$1
    shift
    [ -d "$out/$n/model" ] && { echo "soup $n: exists, skipped"; return; }
    echo "soup $n"
    (cd "$tree" && python -m training.soup --out "$out/$n" "${@/#/$out/}")
}
