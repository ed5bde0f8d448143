#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): the sampled mode's training step against its floor, phase by phase
# (docs/BENCHMARKS.md, "The sampled step against its floor"). The suite's ogbn-arxiv stand-in (the contextual
# SBM that `scripts/ogb_suite.sh --synthetic` trains on: datasets/ogbn-arxiv/dataset.sh) on RANKS ranks
# (default 2, one thread each), METIS-partitioned, trained with datasets/ogbn-arxiv/sampled.toml (GraphSAGE
# 3 x 256, BatchNorm, dropout 0.5, fanouts 5,10,15, 1024 seeds per rank) for 2 epochs without evaluation;
# the second epoch's means per step. Each build with its default settings (this build's default runs the
# worker thread except where ranks of one thread each fill the cores: here it runs without it, so the
# phases add up to the step), and this build also with the worker thread
# (--prefetch-thread on). The floor: every phase's bytes at
# the bandwidth each rank gets while all ranks stream (`tessera bench stream`, RANKS at once), the GEMMs at
# the rate `tessera bench gemm` measures for each of the step's shapes on one thread (scripts/sampled_floor.py).
#   scripts/bench_sampled_step.sh [RANKS]
# BASELINE=REV also builds `tessera` at git revision REV (sources from `git archive`, in
# /tmp/tessera-baseline-REV, kept for later runs) and runs it alternated with this build, on the same graph
# with the same seed: before and after in one run. ROUNDS=R (default 2) runs of each build; medians are not
# taken, every round is printed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=${1:-2}
rounds=${ROUNDS:-2}
case "$rounds" in '' | *[!0-9]* | 0) echo "bench_sampled_step.sh: ROUNDS must be a positive whole number, not '$rounds'" >&2; exit 2 ;; esac
[ -x "$root/build/apps/tessera" ] || bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
export OMP_NUM_THREADS=1
tessera=$root/build/apps/tessera
recipe=$root/datasets/ogbn-arxiv/sampled.toml
work=$(mktemp -d /tmp/tessera-sampled-step-XXXXXX)
trap 'rm -rf "$work"' EXIT

builds=("this=$tessera")
if [ -n "${BASELINE:-}" ]; then
  rev=$(git -C "$root" rev-parse --short=12 "$BASELINE^{commit}")
  base=/tmp/tessera-baseline-$rev
  if [ ! -x "$base/build/apps/tessera" ]; then
    echo "== building tessera at $rev in $base (once)"
    rm -rf "$base" && mkdir -p "$base/src"
    git -C "$root" archive "$rev" | tar -x -C "$base/src"
    prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$root/build/CMakeCache.txt")
    cmake -S "$base/src" -B "$base/build" -DCMAKE_BUILD_TYPE=Release ${prefix:+-DCMAKE_PREFIX_PATH="$prefix"} \
      -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_PYTHON=OFF >"$base/configure.log"
    cmake --build "$base/build" -j "$(nproc)" --target tessera_app >"$base/build.log"
  fi
  builds=("baseline=$base/build/apps/tessera" "${builds[@]}")
fi

# shellcheck source=/dev/null
source "$root/datasets/ogbn-arxiv/dataset.sh"
graph=$work/arxiv-synthetic.h5
mpiexec -n 2 "$tessera" prep synth "${synth_args[@]}" --name "ogbn-arxiv (synthetic stand-in)" -o "$graph" | head -n 1
mpiexec -n 1 "$tessera" partition --data "$graph" --parts "$ranks" | tail -n 1

train() {  # train LABEL PROGRAM METRICS [OPTIONS...]
  local label=$1 program=$2 metrics=$3
  shift 3
  echo "== $label"
  mpiexec -n "$ranks" "$program" train --config "$recipe" --data "$graph" --epochs 2 --eval-every 0 \
    --metrics "$metrics" "$@" >"$metrics.log" 2>&1 || { tail -n 5 "$metrics.log"; exit 1; }
  grep -E "^epoch +[0-9]+ +loss" "$metrics.log"
}
runs=()
for round in $(seq "$rounds"); do
  for build in "${builds[@]}"; do
    label=${build%%=*} program=${build#*=}
    train "$label, round $round" "$program" "$work/$label-$round.jsonl"
    runs+=("$label-$round=$work/$label-$round.jsonl")
  done
  train "this, worker thread on, round $round" "$tessera" "$work/thread-$round.jsonl" --prefetch-thread on
  runs+=("thread-$round=$work/thread-$round.jsonl")
done
steps=$(sed -nE 's/.* ([0-9]+) steps per epoch.*/\1/p' "$work/this-1.jsonl.log" | head -n 1)

echo "== machine: memory bandwidth ($ranks ranks streaming at once), GEMM rates of the step's shapes (one thread)"
for r in $(seq "$ranks"); do mpiexec -n 1 "$tessera" bench stream >"$work/stream-$r.txt" & done
wait
cat "$work"/stream-*.txt | tee "$work/stream.txt"
model=sage dims=128,256,256,40
while read -r m n k; do
  mpiexec -n 1 "$tessera" bench gemm --m "$m" --n "$n" --k "$k" </dev/null | tee -a "$work/gemm.txt"
done < <(python3 "$root/scripts/sampled_floor.py" --bench-sizes "$work/this-1.jsonl" $model $dims | sort -u)

echo
echo "== the sampled step against its floor ($steps steps per epoch; seconds per step, the second epoch)"
python3 "$root/scripts/sampled_floor.py" --table "$steps" "$work/gemm.txt" "$work/stream.txt" $model $dims "${runs[@]}"
