#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): peak memory per rank of a whole `tessera train` run (load and training) on 1, 2, 4
# and 8 ranks, for R-MAT graphs (8 undirected edges per node drawn, 100 features, 47 classes), in the
# full-graph mode (grids 1x1x1, 2x1x1, 2x2x1, 2x2x2; 2 layers, hidden 16, one epoch) and the mini-batch mode
# (one replica on the same 3D grids; 1024-vertex batches, 4 steps, no evaluation), and the partition-parallel
# sampled mode (one replica per rank, block partition; 4 steps). Ends with the ratio of the peaks per
# doubling of ranks, (peak on the fewest / peak on the most)^(1 / doublings), per mode and graph.
#   scripts/bench_memory.sh [LOG2_NODES...]      (default: 18 19 20 21)
# Environment: RANKS="1 2 4 8" picks the rank counts, MODES="full minibatch sampled" the modes, SCRATCH a
# folder for the graphs (removed after).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(18 19 20 21)
read -r -a ranks <<<"${RANKS:-1 2 4 8}"
read -r -a modes <<<"${MODES:-full minibatch sampled}"
scratch=${SCRATCH:-$(mktemp -d /tmp/tessera-bench-memory-XXXXXX)}
tessera=$root/build/apps/tessera
[ -x "$tessera" ] || bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
trap 'rm -f "$scratch"/rmat-*.h5' EXIT
declare -A grid=([1]=1x1x1 [2]=2x1x1 [4]=2x2x1 [8]=2x2x2)
for p in "${ranks[@]}"; do
  [ -n "${grid[$p]:-}" ] || { echo "bench_memory.sh: no grid for $p ranks (1 2 4 8)" >&2; exit 2; }
done
for m in "${modes[@]}"; do
  case "$m" in full|minibatch|sampled) ;; *) echo "bench_memory.sh: unknown mode '$m'" >&2; exit 2 ;; esac
done

# One run; prints its peak memory per rank (the largest over the ranks, MiB) as `tessera train` reports it.
run_peak() {
  local mode=$1 p=$2 file=$3 log=$4
  local args=(--data "$file" --layers 2 --hidden 16 --epochs 1)
  case "$mode" in
    full) args+=(--grid "${grid[$p]}" --memory-per-rank 0) ;;
    minibatch) args+=(--mode minibatch --grid "1x${grid[$p]}" --batch-size 1024 --steps-per-epoch 4
                      --eval-every 0) ;;
    sampled) args+=(--mode sampled --partition block --batch-size 1024 --steps-per-epoch 4 --eval-every 0) ;;
  esac
  mpiexec -n "$p" "$tessera" train "${args[@]}" >"$log"
  sed -n 's/.*peak memory \([0-9.]*\) MiB per rank)$/\1/p' "$log" | tail -1
}

table=$scratch/table.md
ratios=$scratch/ratios.md
printf '| nodes | edges | mode |%s\n' "$(printf ' %s ranks MiB/rank |' "${ranks[@]}")" >"$table"
printf '|---|---|---|%s\n' "$(printf -- '---|%.0s' "${ranks[@]}")" >>"$table"
: >"$ratios"
for log2 in "${sizes[@]}"; do
  case "$log2" in ''|*[!0-9]*) echo "bench_memory.sh: LOG2_NODES must be whole numbers, not '$log2'" >&2; exit 2 ;; esac
  nodes=$((1 << log2))
  file=$scratch/rmat-$log2.h5
  edges=$(mpiexec -n "${ranks[-1]}" "$tessera" prep synth --kind rmat --nodes "$nodes" --edges $((8 * nodes)) \
    --features 100 --classes 47 --seed 1 -o "$file" | sed -n 's/^wrote .* nodes, \([0-9]*\) edges.*/\1/p')
  for mode in "${modes[@]}"; do
    peaks=()
    for p in "${ranks[@]}"; do peaks+=("$(run_peak "$mode" "$p" "$file" "$scratch/memory-$log2-$mode-$p.log")"); done
    printf '| %s | %s | %s |%s\n' "$nodes" "$edges" "$mode" "$(printf ' %.0f |' "${peaks[@]}")" >>"$table"
    python3 - "$nodes" "$mode" "${ranks[0]}" "${ranks[-1]}" "${peaks[0]}" "${peaks[-1]}" >>"$ratios" <<'PY'
import math, sys
nodes, mode, low, high, first, last = sys.argv[1:7]
doublings = math.log2(int(high) / int(low))
if doublings > 0:
    print(f"- {nodes} nodes, {mode}: {float(first):.0f} -> {float(last):.0f} MiB per rank from {low} to {high} "
          f"ranks, {(float(first) / float(last)) ** (1 / doublings):.2f}x per doubling")
PY
  done
done
echo "bench_memory: R-MAT graphs, 2 layers, hidden 16, $(nproc --all) cores, $(date -u +%Y-%m-%d)"
cat "$table"
echo
cat "$ratios"
