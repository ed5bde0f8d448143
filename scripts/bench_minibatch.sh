#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): mini-batch training on the 4D grid against full-graph training on the 3D grid,
# on the ogbn-arxiv-shaped R-MAT graph (3-layer GCN, hidden 256, BatchNorm), RANKS ranks (default 8).
# One table: seconds per epoch (forward + backward + optimizer, median), bytes per rank per epoch, sampling
# time and the time the trainer waited for it, and epochs / seconds until the validation accuracy first
# reaches TARGET x the full-graph run's best. Rows: full graph; mini-batches of several sizes; then the
# ablation of ScaleGNN's optimizations on one batch size: bf16 all-reduces, no sampler thread, no fusion,
# chunked SpMM overlap.
#   scripts/bench_minibatch.sh [RANKS] [EPOCHS] [TARGET]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=${1:-8}
epochs=${2:-20}
target=${3:-0.95}
[ -x "$root/build/apps/tessera" ] || bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
tessera=$root/build/apps/tessera
work=$(mktemp -d /tmp/tessera-minibatch-XXXXXX)
trap 'rm -rf "$work"' EXIT
graph=$work/arxiv-shaped.h5
mpiexec -n 2 "$tessera" prep synth --kind rmat --nodes 169343 --edges 606000 --features 128 --classes 40 --seed 1 \
  -o "$graph" | head -n 1
# 3D part of the grid: the performance model's pick for RANKS / D ranks.
pick() { mpiexec -n 1 "$tessera" plan --data "$graph" --ranks "$1" --layers 3 --hidden 256 | awk '/^ +1  / {print $2}'; }
grid3=$(pick "$ranks")
d=2
[ $((ranks % 2)) -eq 0 ] || d=1
grid4="${d}x$(pick $((ranks / d)))"
echo "full graph on $grid3; mini-batches on $grid4 (D = $d)"

run() {  # run NAME ARGS... -> one line of numbers in $work/NAME.txt
  local name=$1
  shift
  mpiexec -n "$ranks" "$tessera" train --data "$graph" --layers 3 --hidden 256 --norm batch --dropout 0.1 \
    --epochs "$epochs" --eval-every 1 --quiet --metrics "$work/$name.jsonl" "$@" >/dev/null
}
run full --grid "$grid3"
for b in 0.1 0.25 0.5; do run "mb-$b" --mode minibatch --grid "$grid4" --batch-size "$b"; done
run "mb-0.25-bf16" --mode minibatch --grid "$grid4" --batch-size 0.25 --comm-dtype bf16
run "mb-0.25-nothread" --mode minibatch --grid "$grid4" --batch-size 0.25 --no-sampler-thread
run "mb-0.25-nofuse" --mode minibatch --grid "$grid4" --batch-size 0.25 --no-fuse
run "mb-0.25-overlap" --mode minibatch --grid "$grid4" --batch-size 0.25 --overlap

python3 - "$work" "$target" <<'PY'
import json, statistics, sys
work, target = sys.argv[1], float(sys.argv[2])
def load(name):
    return [r for r in map(json.loads, open(f"{work}/{name}.jsonl")) if r.get("kind") == "epoch"]
full = load("full")
goal = target * max(r["valid_acc"] for r in full)
rows = [("full graph", "full"), ("mini-batch B = 0.10 N", "mb-0.1"), ("mini-batch B = 0.25 N", "mb-0.25"),
        ("mini-batch B = 0.50 N", "mb-0.5"), ("  B = 0.25 N, bf16 all-reduces", "mb-0.25-bf16"),
        ("  B = 0.25 N, no sampler thread", "mb-0.25-nothread"), ("  B = 0.25 N, no fusion", "mb-0.25-nofuse"),
        ("  B = 0.25 N, SpMM/all-reduce overlap", "mb-0.25-overlap")]
base = statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in load("mb-0.25")[1:])
print(f"\nvalidation target: {goal:.4f} ({target} x the full-graph run's best)")
print(f"{'run':40s} {'epoch s':>8s} {'vs B=.25':>8s} {'MB/rank':>8s} {'sample ms':>9s} {'wait ms':>8s} "
      f"{'best val':>8s} {'epochs':>6s} {'to target s':>11s}")
for label, name in rows:
    rs = load(name)
    train = [r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in rs]
    epoch = statistics.median(train[1:])
    mb = statistics.median(r.get("bytes_max_rank", 0) for r in rs[1:]) / 2**20
    sample = 1e3 * statistics.median(r.get("sample_s", 0) for r in rs[1:])
    wait = 1e3 * statistics.median(r.get("sample_wait_s", 0) for r in rs[1:])
    reached = next((k for k, r in enumerate(rs) if r["valid_acc"] >= goal), None)
    epochs = "-" if reached is None else str(reached + 1)
    seconds = "-" if reached is None else f"{sum(train[:reached + 1]):.1f}"
    print(f"{label:40s} {epoch:8.3f} {epoch / base - 1:+8.0%} {mb:8.1f} {sample:9.1f} {wait:8.1f} "
          f"{max(r['valid_acc'] for r in rs):8.4f} {epochs:>6s} {seconds:>11s}")
PY
