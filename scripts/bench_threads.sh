#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): threads per rank when nobody sets OMP_NUM_THREADS. RANKS (default 8) ranks train
# a 3-layer GCN (hidden 64) on Cora on a 2x2x2 grid, started as a user would start them (only the settings
# that let mpiexec run as root with more ranks than cores), in alternating rounds:
#   default      no OMP_NUM_THREADS: Tessera chooses (its first line says what)
#   all-cores    OMP_NUM_THREADS=$(nproc): what every rank started before Tessera chose
#   one          OMP_NUM_THREADS=1: one thread per rank, set by hand
#   no-yield     the default with Open MPI's idle yield forced off (mpiexec turns it on when oversubscribed)
# and prints the median epoch time of each.
#   [ROUNDS=3] scripts/bench_threads.sh [RANKS] [EPOCHS]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=${1:-8}
epochs=${2:-20}
rounds=${ROUNDS:-3}
[ -x "$root/build/apps/tessera" ] || bash "$root/scripts/setup.sh"
tessera=$root/build/apps/tessera
work=$(mktemp -d /tmp/tessera-threads-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$tessera" prep ogb "$root/../shared/datasets/cora" -o "$work/cora.h5" --symmetrize >/dev/null
# shellcheck source=/dev/null
source "$root/scripts/mpi_env.sh"
unset OMP_NUM_THREADS OMPI_MCA_hwloc_base_binding_policy OMPI_MCA_mpi_yield_when_idle
cpus=$(nproc)
grid=$( [ "$ranks" -eq 8 ] && echo 2x2x2 || echo "1x1x$ranks")

run() {  # run NAME ENV... -> appends "NAME median-ms" to results
  local name=$1
  shift
  env "$@" $TESSERA_LAUNCHER -n "$ranks" "$tessera" train --data "$work/cora.h5" --grid "$grid" --layers 3 \
    --hidden 64 --epochs "$epochs" --eval-every "$epochs" --metrics "$work/m.jsonl" >"$work/out.txt" 2>&1
  [ "$name" = default ] && [ ! -s "$work/first.txt" ] && head -n 1 "$work/out.txt" >"$work/first.txt"
  python3 - "$work/m.jsonl" "$name" >>"$work/results.txt" <<'PY'
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "epoch"][1:]
print(sys.argv[2], 1e3 * statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in rows))
PY
}

for ((round = 0; round < rounds; ++round)); do
  run default
  run all-cores OMP_NUM_THREADS="$cpus"
  run one OMP_NUM_THREADS=1
  run no-yield OMPI_MCA_mpi_yield_when_idle=0
done
echo "$ranks ranks on $cpus CPUs, grid $grid, Cora, 3-layer GCN hidden 64, median training step of epochs 2..$epochs"
echo "default run's first line: $(cat "$work/first.txt")"
python3 - "$work/results.txt" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, ms = line.split()
    runs[name].append(float(ms))
base = statistics.median(runs["default"])
for name in ["default", "all-cores", "one", "no-yield"]:
    m = statistics.median(runs[name])
    print(f"{name:10s} {m:8.1f} ms  ({m / base:5.2f}x default; rounds: {' '.join(f'{v:.1f}' for v in runs[name])})")
PY
