#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): an R-MAT graph of ogbn-products size (2,449,029 nodes, 61,859,140 undirected
# edges drawn, 100 features, 47 classes) generated and written by 8 ranks, then read back and validated
# by 8 ranks. Prints wall time and peak memory of each step. Target: under 5 minutes and 8 GB here.
#   scripts/bench_prep.sh [RANKS] [SCRATCH_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=${1:-8}
scratch=${2:-$(mktemp -d /tmp/tessera-bench-XXXXXX)}
tessera=$root/build/apps/tessera
[ -x "$tessera" ] || bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
file=$scratch/rmat-products.h5
trap 'rm -f "$file"' EXIT

run() {  # run LABEL COMMAND...: wall time, and the command's own peak-memory line
  local start ms
  start=$(date +%s%N)
  "$@" | tee "$scratch/step.log"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%-8s %4d.%01d s   %s\n' "$label" $((ms / 1000)) $((ms % 1000 / 100)) \
    "$(grep 'peak memory' "$scratch/step.log")" >>"$scratch/summary"
}
: >"$scratch/summary"
label=generate run mpiexec -n "$ranks" "$tessera" prep synth --kind rmat --nodes 2449029 --edges 61859140 \
  --features 100 --classes 47 --seed 1 -o "$file"
label=read run mpiexec -n "$ranks" "$tessera" info "$file"
echo
echo "bench_prep: R-MAT, ogbn-products size, $ranks ranks on $(nproc --all) cores, file $(du -h "$file" | cut -f1)"
cat "$scratch/summary"
