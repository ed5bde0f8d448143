#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): full-graph GCN epochs, Tessera against the PyTorch CPU baseline
# (../shared/bench/torch_gcn.py) on the same generated ogbn-arxiv-shaped graph: 169,343 nodes, about
# 1.17M directed edges (R-MAT, symmetrized), 128 features, 40 classes; 3-layer GCN, hidden 256, 10 epochs,
# 1 rank x THREADS threads. Prints both median epoch times, their ratio, and this machine's floor for the
# same epoch: GEMM flops at the measured BLAS rate + SpMM bytes (each matrix read once) at the measured
# memory bandwidth, the GEMM rate being the best `bench gemm` measures with either host GEMM library. Where
# the build has oneDNN (whose sgemm its host fp32 GEMMs use by default), also Tessera with --host-gemm blas
# (OpenBLAS), the library before; where oneDNN has a bf16 matmul on this CPU, also Tessera with --gemm-dtype
# bf16 against the same floor with `bench gemm --gemm-dtype bf16`'s rate (operand rounding included).
#   scripts/bench_fullgraph.sh [THREADS]        (default 2; installs PyTorch through setup.sh --with-bench)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=${1:-2}
bash "$root/scripts/setup.sh" --with-bench >/dev/null
source "$root/scripts/mpi_env.sh"
tessera=$root/build/apps/tessera
work=$(mktemp -d /tmp/tessera-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
graph=$work/arxiv-shaped.h5
layers=3 hidden=256 epochs=10

mpiexec -n 2 "$tessera" prep synth --kind rmat --nodes 169343 --edges 606000 --features 128 --classes 40 --seed 1 \
  -o "$graph" | head -n 1
export OMP_NUM_THREADS=$threads
echo "== PyTorch ($threads threads)"
torch_line=$(/usr/bin/python3 "$root/../shared/bench/torch_gcn.py" --h5 "$graph" --layers $layers --hidden $hidden \
  --epochs $epochs --threads "$threads" 2>/dev/null)
echo "$torch_line"
echo "== Tessera (1 rank x $threads threads)"
mpiexec -n 1 "$tessera" train --data "$graph" --layers $layers --hidden $hidden --epochs $epochs --dropout 0 \
  --weight-decay 0 --eval-every $epochs --metrics "$work/metrics.jsonl" | tail -n 2
blas_metrics=""
if mpiexec -n 1 "$tessera" bench gemm --m 64 --n 64 --k 64 --host-gemm onednn >/dev/null 2>&1; then
  echo "== Tessera, --host-gemm blas (OpenBLAS for the fp32 GEMMs)"
  mpiexec -n 1 "$tessera" train --data "$graph" --layers $layers --hidden $hidden --epochs $epochs --dropout 0 \
    --weight-decay 0 --eval-every $epochs --host-gemm blas --metrics "$work/metrics-blas.jsonl" | tail -n 2
  blas_metrics=$work/metrics-blas.jsonl
fi
if bf16_gemm=$(mpiexec -n 1 "$tessera" bench gemm --m 169343 --n 256 --k 256 --gemm-dtype bf16 2>/dev/null); then
  echo "== Tessera, --gemm-dtype bf16"
  mpiexec -n 1 "$tessera" train --data "$graph" --layers $layers --hidden $hidden --epochs $epochs --dropout 0 \
    --weight-decay 0 --eval-every $epochs --gemm-dtype bf16 --metrics "$work/metrics-bf16.jsonl" | tail -n 2
else
  bf16_gemm=""
  echo "== no bf16 GEMM in this build (oneDNN) or on this CPU: its row is left out"
fi
echo "== machine ceilings"
gemm_line=$(mpiexec -n 1 "$tessera" bench gemm --m 169343 --n 256 --k 256)
if [ -n "$blas_metrics" ]; then  # the floor takes the best rate of either library
  gemm_line="$gemm_line; $(mpiexec -n 1 "$tessera" bench gemm --m 169343 --n 256 --k 256 --host-gemm blas)"
fi
stream_line=$(mpiexec -n 1 "$tessera" bench stream)
echo "$gemm_line"
echo "$bf16_gemm"
echo "$stream_line"

PYTHONPATH="$root/scripts" python3 - "$work/metrics.jsonl" "$torch_line" "$gemm_line" "$stream_line" \
  "$bf16_gemm" "$work/metrics-bf16.jsonl" "$blas_metrics" <<'PY'
import json, re, statistics, sys
from epoch_floor import describe, phase_table
metrics, torch_line, gemm_line, stream_line, bf16_gemm, bf16_metrics, blas_metrics = sys.argv[1:]

def median_step(path):
    # Training step (forward, loss, backward, Adam) of epochs 2..10: what the PyTorch script times.
    rows = [json.loads(l) for l in open(path)]
    return statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in rows[1:])

def median_phases(path):
    # The step's GEMM, SpMM and loss seconds (the trainer's phase timers) over epochs 2..9: the last
    # epoch's timers include its evaluation.
    rows = [json.loads(l) for l in open(path)][1:-1]
    return [statistics.median(r["phases"][k]["max_s"] for r in rows) for k in ("gemm", "spmm", "loss")]

tessera = median_step(metrics)
dims = [128, 256, 256, 40]
torch = float(re.search(r"epoch_median_s ([0-9.]+)", torch_line).group(1))
nnz = int(re.search(r"nnz (\d+)", torch_line).group(1))
n = int(re.search(r"nodes (\d+)", torch_line).group(1))
floor, text = describe(n, nnz, dims, gemm_line, stream_line)
print(f"\nPyTorch median epoch   {torch:.3f} s")
print(f"Tessera median epoch   {tessera:.3f} s   -> {torch / tessera:.2f}x faster (target >= 3x)")
print(f"machine floor          {text}")
print(f"Tessera / floor        {tessera / floor:.2f}x")
print("\n".join(["Tessera's step by phase (medians of epochs 2-9):"] +
                phase_table(n, nnz, dims, gemm_line, stream_line, median_phases(metrics), tessera)))
if blas_metrics:
    blas = median_step(blas_metrics)
    print(f"\nTessera, BLAS GEMMs    {blas:.3f} s   -> {blas / tessera:.2f}x the default step, {blas / floor:.2f}x the floor")
    print("\n".join(["BLAS step by phase:"] +
                    phase_table(n, nnz, dims, gemm_line, stream_line, median_phases(blas_metrics), blas)))
if bf16_gemm:
    bf16 = median_step(bf16_metrics)
    floor16, text16 = describe(n, nnz, dims, bf16_gemm, stream_line)
    print(f"\nTessera bf16 GEMMs     {bf16:.3f} s   -> {tessera / bf16:.2f}x the fp32 step")
    print(f"bf16 floor             {text16}")
    print(f"Tessera bf16 / floor   {bf16 / floor16:.2f}x")
    print("\n".join(["bf16 step by phase:"] +
                    phase_table(n, nnz, dims, bf16_gemm, stream_line, median_phases(bf16_metrics), bf16)))
PY
