#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job on the built-in default: set up, generate the default contextual-SBM graph (20,000 nodes,
# 8 learnable classes) on 2 ranks, validate it, then train a 2-layer GCN on it and print its accuracy.
#   scripts/demo.sh [OUT_DIR]     (default: out/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/out}
bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
mkdir -p "$out"
tessera=$root/build/apps/tessera
mpiexec -n 2 "$tessera" prep synth --kind csbm --nodes 20000 --edges 100000 --features 32 --classes 8 --seed 1 \
  -o "$out/csbm-default.h5"
mpiexec -n 2 "$tessera" info "$out/csbm-default.h5"
OMP_NUM_THREADS=$(nproc --all) mpiexec -n 1 "$tessera" train --data "$out/csbm-default.h5" --model gcn --layers 2 \
  --hidden 64 --epochs 100 --metrics "$out/metrics.jsonl" --save-predictions "$out/predictions.txt"
