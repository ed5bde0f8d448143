#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Verifies the GPU path on a machine with an NVIDIA GPU, from a bare copy of the repository and without
# internet: builds the CUDA variant for the GPU present (sm_90 for H100/H200, sm_80 for A100), runs
# `ctest -L gpu` on it (kernels against the reference on every path, the every-factorization equivalence,
# bf16 and byte-schedule tests with several ranks sharing the GPU, device collectives, NCCL against MPI
# where each rank has a GPU of its own), then the arxiv-shaped epoch benchmark against the device's floor.
#
#   bash scripts/gpu_check.sh [--build-dir DIR] [EPOCHS]        (default 10 epochs)
#
# --build-dir DIR uses a CUDA build made beforehand (on a login node, or another machine with the same
# libraries) instead of building: nothing is installed or compiled then, and ctest needs only cmake's ctest.
#
# Offline, it needs what scripts/setup.sh would otherwise download: the Debian packages installed, and the
# Kokkos source in .deps/src/kokkos-3.4.01 (12 MB; carry it from a machine that ran setup.sh) or a CUDA
# Kokkos 3.4 through Kokkos_ROOT. With no GPU visible it says so and exits 0 without building.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { echo "gpu_check: $1 (usage: gpu_check.sh [--build-dir DIR] [EPOCHS])" >&2; exit 2; }
prebuilt=""
if [ "${1:-}" = --build-dir ]; then
  [ $# -ge 2 ] || usage "--build-dir needs a directory"
  [ -x "$2/apps/tessera" ] || usage "--build-dir '$2' holds no apps/tessera (not a CUDA build directory)"
  prebuilt=$(cd "$2" && pwd); shift 2
fi
epochs=${1:-10}
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] || usage "EPOCHS must be a positive integer, not '$epochs'"
[ $# -le 1 ] || usage "unexpected argument '$2'"
export PATH=/usr/local/cuda/bin:$PATH

if ! gpus=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null) || [ -z "$gpus" ]; then
  echo "gpu_check: skipped: no NVIDIA GPU visible (nvidia-smi lists none)"
  exit 0
fi
echo "gpu_check: $(echo "$gpus" | wc -l) GPU(s): $(echo "$gpus" | head -n 1)"
case "$(echo "$gpus" | head -n 1 | awk -F', ' '{print $2}')" in
  9.*) arch=90 build=$root/build-cuda-sm90 ;;
  8.0) arch=80 build=$root/build-cuda ;;
  *) echo "gpu_check: compute capability $(echo "$gpus" | head -n 1) is neither 8.0 (A100) nor 9.x (H100/H200)" >&2
     exit 1 ;;
esac

if [ -n "$prebuilt" ]; then
  build=$prebuilt
  echo "gpu_check: using the build in $build (not rebuilt)"
else
  bash "$root/scripts/setup.sh" --backend cuda --cuda-arch "$arch"
fi
source "$root/scripts/mpi_env.sh"
echo "== ctest -L gpu ($build)"
# A failing test does not stop the benchmark below: one run on a lent machine should report both.
(cd "$build" && ctest -L gpu --output-on-failure -j "$(nproc)") || { echo "gpu_check: ctest -L gpu failed" >&2; status=1; }

tessera=$build/apps/tessera
work=$(mktemp -d /tmp/tessera-gpu-XXXXXX)
trap 'rm -rf "$work"' EXIT
graph=$work/arxiv-shaped.h5
echo "== arxiv-shaped 3-layer GCN (hidden 256), $epochs epochs"
mpiexec -n 1 "$tessera" prep synth --kind rmat --nodes 169343 --edges 606000 --features 128 --classes 40 \
  --seed 1 -o "$graph" | head -n 1
run() {  # ranks, extra options...: the summary line, metrics in $work/metrics-<ranks>.jsonl
  local ranks=$1; shift
  mpiexec -n "$ranks" "$tessera" train --data "$graph" --layers 3 --hidden 256 --epochs "$epochs" --dropout 0 \
    --weight-decay 0 --eval-every "$epochs" --metrics "$work/metrics-$ranks.jsonl" "$@" | tail -n 1
}
one=$(run 1)
echo "1 rank:                     $one"
two=$(run 2 --grid 2x1x1 --comm mpi)
echo "2 ranks sharing the GPU:    $two"
if [ "${one%% (mean*}" = "${two%% (mean*}" ]; then echo "same summary line: yes"; else
  echo "gpu_check: the 2-rank run's summary differs from the 1-rank run's" >&2; status=1; fi

echo "== device ceilings"
gemm_line=$(mpiexec -n 1 "$tessera" bench gemm --m 169343 --n 256 --k 256)
team_gemm=$(mpiexec -n 1 "$tessera" bench gemm --m 169343 --n 256 --k 256 --kernels team)
spmm_line=$(mpiexec -n 1 "$tessera" bench spmm --data "$graph" --widths 40,256 | tail -n 1)
team_spmm=$(mpiexec -n 1 "$tessera" bench spmm --data "$graph" --widths 40,256 --kernels team | tail -n 1)
stream_line=$(mpiexec -n 1 "$tessera" bench stream --elements $((1 << 28)))
printf '%s\n' "$gemm_line" "$team_gemm" "$spmm_line" "$team_spmm" "$stream_line"
nnz=$(mpiexec -n 1 "$tessera" info "$graph" | awk '/^nodes:/ {n = $2} /^edges:/ {e = $2} END {print n + e}')
nodes=$(mpiexec -n 1 "$tessera" info "$graph" | awk '/^nodes:/ {print $2}')
PYTHONPATH="$root/scripts" python3 - "$work/metrics-1.jsonl" "$nodes" "$nnz" "$gemm_line" "$spmm_line" \
  "$stream_line" <<'PY'
import json, re, statistics, sys
from epoch_floor import describe
metrics, n, nnz, gemm_line, spmm_line, stream_line = sys.argv[1:]
rows = [r for r in map(json.loads, open(metrics)) if r.get("kind") == "epoch"]
step = statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in rows[1:])
# The ceiling is the best of the triad kernel and the library's device copy (the line's GB/s readings).
stream = max(float(x) for x in re.findall(r"([0-9.]+) GB/s", stream_line))
floor, text = describe(int(n), int(nnz), [128, 256, 256, 40], gemm_line, f"{stream} GB/s")
gemm = max(float(x) for x in re.findall(r"([0-9.]+) GFLOP/s", gemm_line))
spmm = float(re.search(r"([0-9.]+) GB/s", spmm_line).group(1))
print(f"\ntraining step (median of epochs 2..): {step:.4f} s per epoch")
print(f"SpMM (width 256) {spmm:.0f} GB/s = {spmm / stream:.2f}x the measured stream bandwidth {stream:.0f} GB/s")
print(f"GEMM {gemm / 1e3:.2f} TFLOP/s (cuBLAS, fp32)")
print(f"device floor {text}")
print(f"step / floor {step / floor:.2f}x (target within 3x)")
PY
exit "${status:-0}"
