#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): full-graph loading of R-MAT graphs (8 undirected edges per node drawn, about 16
# directed after symmetrizing; 100 features, 47 classes) on 1, 2, 4 and 8 ranks (grids 1x1x1, 2x1x1,
# 2x2x1, 2x2x2), 2 layers, hidden 16, one epoch. Prints a table of load time, its adjacency part, and peak
# memory per rank at the end of the load and of the run, as `tessera train` reports them.
#   scripts/bench_load.sh [LOG2_NODES...]      (default: 18 20)
# Environment: RANKS="1 2 4 8" picks the rank counts, SCRATCH a folder for the graphs (removed after).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(18 20)
read -r -a ranks <<<"${RANKS:-1 2 4 8}"
scratch=${SCRATCH:-$(mktemp -d /tmp/tessera-bench-load-XXXXXX)}
tessera=$root/build/apps/tessera
[ -x "$tessera" ] || bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
trap 'rm -f "$scratch"/rmat-*.h5' EXIT
declare -A grid=([1]=1x1x1 [2]=2x1x1 [4]=2x2x1 [8]=2x2x2)

table=$scratch/table.md
printf '| nodes | edges | ranks | grid | load s | adjacency s | load peak MiB/rank | run peak MiB/rank |\n' >"$table"
printf '|---|---|---|---|---|---|---|---|\n' >>"$table"
for log2 in "${sizes[@]}"; do
  case "$log2" in ''|*[!0-9]*) echo "bench_load.sh: LOG2_NODES must be whole numbers, not '$log2'" >&2; exit 2 ;; esac
  nodes=$((1 << log2))
  file=$scratch/rmat-$log2.h5
  edges=$(mpiexec -n "${ranks[-1]}" "$tessera" prep synth --kind rmat --nodes "$nodes" --edges $((8 * nodes)) \
    --features 100 --classes 47 --seed 1 -o "$file" | sed -n 's/^wrote .* nodes, \([0-9]*\) edges.*/\1/p')
  for p in "${ranks[@]}"; do
    g=${grid[$p]:-}
    [ -n "$g" ] || { echo "bench_load.sh: no grid for $p ranks (1 2 4 8)" >&2; exit 2; }
    log=$scratch/load-$log2-$p.log
    mpiexec -n "$p" "$tessera" train --data "$file" --grid "$g" --layers 2 --hidden 16 --epochs 1 \
      --memory-per-rank 0 --verbose >"$log"
    python3 - "$log" "$nodes" "$edges" "$p" "$g" >>"$table" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
loaded = re.search(r"^loaded .* in ([0-9.]+) s .*?adjacency blocks", text, re.M)
phases = re.search(r"^load phases \([^)]*\): (.*)$", text, re.M).group(1)
adjacency = sum(float(m) for m in re.findall(r"adjacency \d+ ([0-9.]+) s", phases))
load_peak = max(float(m) for m in re.findall(r"([0-9.]+) MiB", phases))
run_peak = re.search(r"peak memory ([0-9.]+) MiB per rank\)$", text, re.M).group(1)
nodes, edges, ranks, grid = sys.argv[2:6]
print(f"| {nodes} | {edges} | {ranks} | {grid} | {float(loaded.group(1)):.1f} | {adjacency:.1f} | "
      f"{load_peak:.0f} | {float(run_peak):.0f} |")
PY
  done
done
echo "bench_load: R-MAT graphs, 2 layers, hidden 16, $(nproc --all) cores, $(date -u +%Y-%m-%d)"
cat "$table"
