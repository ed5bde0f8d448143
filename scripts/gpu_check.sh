#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Verifies the GPU path on a machine with an NVIDIA GPU, from a bare copy of the repository and without
# internet: builds the CUDA variant for the GPU present (sm_90 for H100/H200, sm_80 for A100), runs
# `ctest -L gpu` on it (kernels against the reference on every path, the every-factorization equivalence,
# bf16 and byte-schedule tests with several ranks sharing the GPU, device collectives, NCCL against MPI
# where each rank has a GPU of its own, the one-rank mini-batch and sampled trainers, each of those alone),
# then the arxiv-shaped benchmarks: the full-graph step against the device floor (fp32, and with TF32
# GEMMs: --allow-tf32), phase by phase and kernel by kernel (`train --profile-kernels`); the mini-batch
# step's cost per sampled vertex against the full-graph step's per node, with its host-to-device bytes;
# the sampled step built on the device against the same run sampled on the host (--sample-on host) and
# against a host build on the same machine's cores, with the runs' losses; the GAT step (2 layers, 8
# heads) with its kernel profile, beside the same model in PyTorch on the same GPU (index ops, and PyG's
# GATConv where installed).
#
#   bash scripts/gpu_check.sh [--build-dir DIR] [--host-build DIR] [--tests REGEX|none] [EPOCHS]
#
# --build-dir DIR uses a CUDA build made beforehand (on a login node, or another machine with the same
# libraries) instead of building: nothing is installed or compiled then, and ctest needs only cmake's ctest.
# --host-build DIR: the host build the sampled step is compared with (default build/ where it holds
# apps/tessera; none: that comparison is left out). --tests REGEX runs only the gpu tests it matches
# (none: no tests). EPOCHS (default 10) is the full-graph runs' epoch count.
#
# Offline, it needs what scripts/setup.sh would otherwise download: the Debian packages installed, and the
# Kokkos source in .deps/src/kokkos-3.4.01 (12 MB; carry it from a machine that ran setup.sh) or a CUDA
# Kokkos 3.4 through Kokkos_ROOT. With no GPU visible it says so and exits 0 without building.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() {
  echo "gpu_check: $1 (usage: gpu_check.sh [--build-dir DIR] [--host-build DIR] [--tests REGEX|none] [EPOCHS])" >&2
  exit 2
}
prebuilt="" host_build="" tests=""
[ -x "$root/build/apps/tessera" ] && host_build=$root/build
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir)
      [ $# -ge 2 ] || usage "--build-dir needs a directory"
      [ -x "$2/apps/tessera" ] || usage "--build-dir '$2' holds no apps/tessera (not a CUDA build directory)"
      prebuilt=$(cd "$2" && pwd); shift 2 ;;
    --host-build)
      [ $# -ge 2 ] || usage "--host-build needs a directory or none"
      if [ "$2" = none ]; then host_build=""; else
        [ -x "$2/apps/tessera" ] || usage "--host-build '$2' holds no apps/tessera (not a build directory)"
        host_build=$(cd "$2" && pwd)
      fi
      shift 2 ;;
    --tests)
      [ $# -ge 2 ] && [ -n "$2" ] || usage "--tests needs a regular expression or none"
      tests=$2; shift 2 ;;
    -*) usage "unknown option '$1'" ;;
    *) break ;;
  esac
done
epochs=${1:-10}
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] && [ "$epochs" -ge 3 ] || usage "EPOCHS must be a whole number of 3 or more, not '$epochs'"
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
if [ "$tests" != none ]; then
  echo "== ctest -L gpu ${tests:+-R '$tests' }($build)"
  # A failing test does not stop the benchmarks below: one run on a lent machine should report both.
  (cd "$build" && ctest -L gpu ${tests:+-R "$tests"} --output-on-failure -j "$(nproc)") ||
    { echo "gpu_check: ctest -L gpu failed" >&2; status=1; }
fi

tessera=$build/apps/tessera
work=$(mktemp -d /tmp/tessera-gpu-XXXXXX)
trap 'rm -rf "$work"' EXIT
graph=$work/arxiv-shaped.h5
echo "== arxiv-shaped 3-layer GCN (hidden 256), $epochs epochs"
mpiexec -n 1 "$tessera" prep synth --kind rmat --nodes 169343 --edges 606000 --features 128 --classes 40 \
  --seed 1 -o "$graph" | head -n 1
run() {  # ranks tag, extra options...: the summary line, metrics in $work/metrics-<tag>.jsonl
  local ranks=$1 tag=$2; shift 2
  mpiexec -n "$ranks" "$tessera" train --data "$graph" --layers 3 --hidden 256 --epochs "$epochs" --dropout 0 \
    --weight-decay 0 --eval-every "$epochs" --metrics "$work/metrics-$tag.jsonl" "$@" | tail -n 1
}
one=$(run 1 1)
echo "1 rank:                     $one"
two=$(run 2 2 --grid 2x1x1 --comm mpi)
echo "2 ranks sharing the GPU:    $two"
if [ "${one%% (mean*}" = "${two%% (mean*}" ]; then echo "same summary line: yes"; else
  echo "gpu_check: the 2-rank run's summary differs from the 1-rank run's" >&2; status=1; fi
echo "1 rank, --allow-tf32:       $(run 1 tf32 --allow-tf32)"
echo "== the same 1-rank run, every kernel timed (device time; the step above is the unprofiled run's)"
mpiexec -n 1 "$tessera" train --data "$graph" --layers 3 --hidden 256 --epochs "$epochs" --dropout 0 \
  --weight-decay 0 --eval-every "$epochs" --quiet --profile-kernels >"$work/profile.log" || status=1
sed -n '/^kernel profile/,$p' "$work/profile.log" | grep -v "^best valid"

echo "== device ceilings"
gemm_line=$(mpiexec -n 1 "$tessera" bench gemm --m 169343 --n 256 --k 256)
team_gemm=$(mpiexec -n 1 "$tessera" bench gemm --m 169343 --n 256 --k 256 --kernels team)
spmm_line=$(mpiexec -n 1 "$tessera" bench spmm --data "$graph" --widths 40,256 | tail -n 1)
team_spmm=$(mpiexec -n 1 "$tessera" bench spmm --data "$graph" --widths 40,256 --kernels team | tail -n 1)
stream_line=$(mpiexec -n 1 "$tessera" bench stream --elements $((1 << 28)))
printf '%s\n' "$gemm_line" "$team_gemm" "$spmm_line" "$team_spmm" "$stream_line"
mapfile -t sizes < <(python3 "$root/scripts/epoch_floor.py" --bench-sizes 169343 128,256,256,40)
for size in "${sizes[@]}"; do
  read -r m n k <<<"$size"
  mpiexec -n 1 "$tessera" bench gemm --m "$m" --n "$n" --k "$k" >>"$work/shapes.txt"
done
nnz=$(mpiexec -n 1 "$tessera" info "$graph" | awk '/^nodes:/ {n = $2} /^edges:/ {e = $2} END {print n + e}')
nodes=$(mpiexec -n 1 "$tessera" info "$graph" | awk '/^nodes:/ {print $2}')

echo "== mini-batch (1x1x1x1, a quarter of the nodes per step) and sampled (fanouts 5,10,15, 1024 seeds) steps"
sampled() {  # TESSERA OUT_PREFIX [OPTION...]: a sampled run (on a device build: built there unless told)
  local bin=$1 out=$2
  shift 2
  mpiexec -n 1 "$bin" train --data "$graph" --mode sampled --fanouts 5,10,15 --batch-size 1024 --layers 3 \
    --hidden 256 --dropout 0 --steps-per-epoch 16 --epochs 4 --eval-every 0 --metrics "$out-sampled.jsonl" \
    --profile-kernels "$@" >"$out-sampled.log"
}
modes() {  # TESSERA OUT_PREFIX: the mini-batch and sampled runs of one build
  local bin=$1 out=$2
  mpiexec -n 1 "$bin" train --data "$graph" --mode minibatch --grid 1x1x1x1 --batch-size 0.25 --layers 3 \
    --hidden 256 --dropout 0 --epochs 4 --eval-every 0 --metrics "$out-minibatch.jsonl" --profile-kernels \
    >"$out-minibatch.log" && sampled "$bin" "$out"
}
modes "$tessera" "$work/device" || { echo "gpu_check: a device mini-batch or sampled run failed" >&2; status=1; }
sampled "$tessera" "$work/device-host-sampled" --sample-on host ||
  { echo "gpu_check: the device build's host-sampled run failed" >&2; status=1; }
for mode in minibatch sampled; do  # the device runs' largest kernels, their sum and their copies
  echo "$mode:"
  sed -n '/^kernel profile/,$p' "$work/device-$mode.log" | grep -v "^best valid" | sed -n '2,9p;/ms per epoch in/,$p'
done
if [ -n "$host_build" ]; then
  OMP_NUM_THREADS=$(nproc) modes "$host_build/apps/tessera" "$work/host" ||
    { echo "gpu_check: a host mini-batch or sampled run failed" >&2; status=1; }
fi

echo "== GAT (2 layers, 8 heads x 8 hidden, one averaged output head), $epochs epochs"
gat=(--model gat --layers 2 --hidden 8 --heads 8 --output-heads 1 --dropout 0 --weight-decay 0 --lr 0.005)
mpiexec -n 1 "$tessera" train --data "$graph" "${gat[@]}" --epochs "$epochs" --eval-every "$epochs" \
  --metrics "$work/gat.jsonl" | tail -n 1 || { echo "gpu_check: the GAT run failed" >&2; status=1; }
mpiexec -n 1 "$tessera" train --data "$graph" "${gat[@]}" --epochs "$epochs" --eval-every "$epochs" --quiet \
  --profile-kernels >"$work/gat-profile.log" || status=1
sed -n '/^kernel profile/,$p' "$work/gat-profile.log" | grep -v "^best valid" | sed -n '1,12p;/ms per epoch in/,$p'
# The same model in PyTorch on the same GPU, where its python3 has torch with CUDA: index ops as PyG's
# GATConv computes them, and PyG's GATConv itself where torch_geometric is installed.
if python3 -c 'import torch, h5py, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  for impl in index pyg; do
    python3 "$root/scripts/torch_gat.py" --h5 "$graph" --epochs "$epochs" --device cuda --impl "$impl" \
      >"$work/torch-gat-$impl.txt" 2>"$work/torch-gat-$impl.err" ||
      echo "torch GAT ($impl): $(tail -n 1 "$work/torch-gat-$impl.err")"
  done
fi

PYTHONPATH="$root/scripts" python3 - "$work" "$nodes" "$nnz" "$gemm_line" "$spmm_line" "$stream_line" <<'PY'
import json, os, re, statistics, sys
from epoch_floor import describe, phase_table, shape_floor
work, n, nnz, gemm_line, spmm_line, stream_line = sys.argv[1:]
n, nnz, dims = int(n), int(nnz), [128, 256, 256, 40]
def epochs(path):
    return [r for r in map(json.loads, open(path)) if r.get("kind") == "epoch"]
rows = epochs(f"{work}/metrics-1.jsonl")[1:]
step = statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in rows)
# The ceiling is the best of the triad kernel and the library's device copy (the line's GB/s readings).
stream = max(float(x) for x in re.findall(r"([0-9.]+) GB/s", stream_line))
floor, text = describe(n, nnz, dims, gemm_line, f"{stream} GB/s")
gemm = max(float(x) for x in re.findall(r"([0-9.]+) GFLOP/s", gemm_line))
spmm = float(re.search(r"([0-9.]+) GB/s", spmm_line).group(1))
print(f"\ntraining step (median of epochs 2..): {step * 1e3:.3f} ms")
print(f"SpMM (width 256) {spmm:.0f} GB/s = {spmm / stream:.2f}x the measured stream bandwidth {stream:.0f} GB/s")
print(f"GEMM {gemm / 1e3:.2f} TFLOP/s (cuBLAS, fp32)")
print(f"device floor {text}")
print(f"step / floor {step / floor:.2f}x (target within 1.5x)")
tf32_rows = epochs(f"{work}/metrics-tf32.jsonl")[1:] if os.path.exists(f"{work}/metrics-tf32.jsonl") else []
if tf32_rows:
    tf32 = statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in tf32_rows)
    print(f"training step with --allow-tf32: {tf32 * 1e3:.3f} ms = {tf32 / floor:.2f}x the fp32 floor")
# The phase timers fence around each GEMM and SpMM: their sum can exceed what the unfenced step spends.
def phase(k):
    times = [r["phases"][k]["max_s"] for r in rows if k in r.get("phases", {})]
    return statistics.median(times) if times else 0.0
phases = [phase(k) for k in ("gemm", "spmm", "loss")]
print("step by phase (medians of epochs 2.., phase timers fence each call):")
print("\n".join(phase_table(n, nnz, dims, gemm_line, f"{stream} GB/s", phases, step)))
shapes, lines = shape_floor(n, dims, open(f"{work}/shapes.txt").read().splitlines())
print(f"the step's GEMMs each at cuBLAS's rate for its own shape: {shapes * 1e3:.3f} ms")
print("\n".join(lines))
full_row = step / n
def per_seed(prefix, mode):
    path = f"{work}/{prefix}-{mode}.jsonl"
    if not os.path.exists(path):
        return None, None
    e = epochs(path)[1:]
    return statistics.median(1 / r["throughput"] for r in e), [round(r["loss"], 6) for r in e]
mb, _ = per_seed("device", "minibatch")
if mb:
    print(f"\nmini-batch step per sampled vertex {mb * 1e9:.1f} ns = {mb / full_row:.2f}x the full-graph step per "
          f"node ({full_row * 1e9:.1f} ns; target within 2x)")
dev, dev_loss = per_seed("device", "sampled")
host, host_loss = per_seed("host", "sampled")
hs, hs_loss = per_seed("device-host-sampled", "sampled")
if dev:
    print(f"sampled step per seed on the device {dev * 1e6:.2f} us (steps built on the device)")
if dev and hs:
    print(f"sampled step per seed on the device with --sample-on host {hs * 1e6:.2f} us: building the steps "
          f"on the device runs {hs / dev:.2f}x as fast; epoch losses {dev_loss} and {hs_loss}")
if dev and host:
    print(f"sampled step per seed on the host build ({os.cpu_count()} threads) {host * 1e6:.2f} us: the device "
          f"runs it {host / dev:.2f}x as fast (target 5x); epoch losses device {dev_loss}, host {host_loss}")
gat_path = f"{work}/gat.jsonl"
if os.path.exists(gat_path) and len(epochs(gat_path)) > 1:
    g = epochs(gat_path)[1:]
    gat = statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in g)
    print(f"\nGAT step (median of epochs 2..): {gat * 1e3:.3f} ms")
    for impl, name in (("index", "PyTorch index ops"), ("pyg", "PyG GATConv")):
        path = f"{work}/torch-gat-{impl}.txt"
        found = re.search(r"epoch_median_s ([0-9.]+)", open(path).read()) if os.path.exists(path) else None
        if found:
            print(f"{name} on the same GPU: {float(found.group(1)) * 1e3:.3f} ms per epoch "
                  f"({float(found.group(1)) / gat:.2f}x Tessera's step)")
PY
exit "${status:-0}"
