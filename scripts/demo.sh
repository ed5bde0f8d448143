#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job on the built-in default: set up, generate the default contextual-SBM graph on 2 ranks,
# then read it back and validate it on 2 ranks.
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
