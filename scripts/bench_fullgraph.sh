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
# bf16 against the same floor with `bench gemm --gemm-dtype bf16`'s rate (operand rounding included), and in
# every round Tessera with bf16 storage too (--feature-dtype bf16 --activation-dtype bf16 with bf16 GEMMs):
# its step against the fp32 floor and its SpMM phase against the fp32 run's of the same round.
# Then the step's eight GEMMs each at the best rate either library reaches on its own shape (the narrow and
# transposed shapes run below the square rate the floor takes), and the floor with those GEMM times; then
# also with the SpMM reading a row of X per nonzero at the measured bandwidth (a gathering SpMM on a graph
# whose X does not stay in cache cannot read X only once): what the libraries and the memory allow. Each
# round's step is also given against its floor with that SpMM term (the "gather floor").
# Then vertex orderings: the same step on the R-MAT graph and on an arxiv-shaped graph with communities (a
# contextual SBM, 40 classes, 65% of edges inside a class, ogbn-arxiv's edge homophily; its generator numbers
# nodes at random), each as generated and reordered by every `tessera prep reorder --order` in ORDERINGS
# (default "rcm degree metis"; ORDERINGS=none skips the section), with the SpMM against both of its floors; and
# the 2x2x2 grid on 8 ranks of one thread each, as generated and reordered by METIS (reported, not judged: 8
# ranks share the machine's cores).
#   scripts/bench_fullgraph.sh [THREADS]        (default 2; installs PyTorch through setup.sh --with-bench)
# ROUNDS=R (default 1) runs Tessera's runs and the floor's measurements R times, alternated, and reports the
# median of the rounds' steps and of their ratios to their own round's floor (a shared machine moves by 20%
# within an hour; one round's ratio is then one sample).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=${1:-2}
rounds=${ROUNDS:-1}
case "$rounds" in '' | *[!0-9]* | 0) echo "bench_fullgraph.sh: ROUNDS must be a positive whole number, not '$rounds'" >&2; exit 2 ;; esac
bash "$root/scripts/setup.sh" --with-bench >/dev/null
source "$root/scripts/mpi_env.sh"
tessera=$root/build/apps/tessera
work=$(mktemp -d /tmp/tessera-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
graph=$work/arxiv-shaped.h5
layers=3 hidden=256 epochs=10 nodes=169343 dims=128,256,256,40

mpiexec -n 2 "$tessera" prep synth --kind rmat --nodes $nodes --edges 606000 --features 128 --classes 40 --seed 1 \
  -o "$graph" | head -n 1
export OMP_NUM_THREADS=$threads
echo "== PyTorch ($threads threads)"
torch_line=$(/usr/bin/python3 "$root/../shared/bench/torch_gcn.py" --h5 "$graph" --layers $layers --hidden $hidden \
  --epochs $epochs --threads "$threads" 2>/dev/null)
echo "$torch_line"
train() {  # [data=FILE] train METRICS [OPTIONS...]: one Tessera run (on $graph unless data is set), its last two lines
  local metrics=$1
  shift
  mpiexec -n 1 "$tessera" train --data "${data:-$graph}" --layers $layers --hidden $hidden --epochs $epochs --dropout 0 \
    --weight-decay 0 --eval-every $epochs --metrics "$metrics" "$@" | tail -n 2
}
libraries=(auto)
if mpiexec -n 1 "$tessera" bench gemm --m 64 --n 64 --k 64 --host-gemm onednn >/dev/null 2>&1; then
  libraries=(onednn blas)
fi
bf16_gemm=$(mpiexec -n 1 "$tessera" bench gemm --m $nodes --n 256 --k 256 --gemm-dtype bf16 2>/dev/null) || bf16_gemm=""
for round in $(seq "$rounds"); do
  echo "== round $round of $rounds: Tessera (1 rank x $threads threads)"
  train "$work/metrics-$round.jsonl"
  if [ -n "$bf16_gemm" ]; then
    echo "== round $round: Tessera, bf16 storage and GEMMs"
    train "$work/metrics-bf16-storage-$round.jsonl" --gemm-dtype bf16 --feature-dtype bf16 --activation-dtype bf16
  fi
  if [ ${#libraries[@]} -gt 1 ]; then
    echo "== round $round: Tessera, --host-gemm blas (OpenBLAS for the fp32 GEMMs)"
    train "$work/metrics-blas-$round.jsonl" --host-gemm blas
  fi
  echo "== round $round: machine ceilings"
  for library in "${libraries[@]}"; do  # the floor takes the best rate of either library
    mpiexec -n 1 "$tessera" bench gemm --m $nodes --n 256 --k 256 --host-gemm "$library" | tee -a "$work/gemm-$round.txt"
  done
  mpiexec -n 1 "$tessera" bench stream | tee "$work/stream-$round.txt"
done
echo "== the step's GEMM shapes, each library"
mapfile -t sizes < <(python3 "$root/scripts/epoch_floor.py" --bench-sizes $nodes $dims)
for size in "${sizes[@]}"; do
  read -r m n k <<<"$size"
  for library in "${libraries[@]}"; do
    mpiexec -n 1 "$tessera" bench gemm --m "$m" --n "$n" --k "$k" --host-gemm "$library" | tee -a "$work/shapes.txt"
  done
done
orderings=${ORDERINGS-rcm degree metis}
[ "$orderings" = none ] && orderings=""
if [ -n "$orderings" ]; then
  csbm=$work/arxiv-csbm.h5
  mpiexec -n 2 "$tessera" prep synth --kind csbm --nodes $nodes --edges 1157799 --features 128 --classes 40 \
    --intra-class 0.65 --seed 1 -o "$csbm" | head -n 1
  for name in rmat csbm; do
    input=$graph
    [ $name = csbm ] && input=$csbm
    echo "== orderings of the $name graph (1 rank x $threads threads)"
    "$tessera" info "$input" >"$work/info-$name.txt"
    data=$input train "$work/order-$name-none.jsonl"
    for order in $orderings; do
      "$tessera" prep reorder "$input" -o "$work/$name-$order.h5" --order "$order" | tail -n 1 | tee "$work/order-$name-$order.txt"
      data=$work/$name-$order.h5 train "$work/order-$name-$order.jsonl"
    done
  done
  echo "== the csbm graph on the 2x2x2 grid, 8 ranks x 1 thread"
  [ -f "$work/csbm-metis.h5" ] || "$tessera" prep reorder "$csbm" -o "$work/csbm-metis.h5" --order metis >/dev/null
  for order in none metis; do
    input=$work/csbm-$order.h5
    [ $order = none ] && input=$csbm
    OMP_NUM_THREADS=1 mpiexec -n 8 "$tessera" train --data "$input" --grid 2x2x2 --layers $layers \
      --hidden $hidden --epochs 4 --dropout 0 --weight-decay 0 --eval-every 4 --metrics "$work/grid-$order.jsonl" | tail -n 1
  done
fi

if [ -n "$bf16_gemm" ]; then
  echo "== Tessera, --gemm-dtype bf16"
  train "$work/metrics-bf16.jsonl" --gemm-dtype bf16
else
  echo "== no bf16 GEMM in this build (oneDNN) or on this CPU: its rows are left out"
fi

PYTHONPATH="$root/scripts" python3 - "$work" "$rounds" "$torch_line" "$bf16_gemm" "${#libraries[@]}" "$dims" "$orderings" <<'PY'
import json, re, statistics, sys
from epoch_floor import describe, phase_table, shape_floor, spmm_gathered_bytes, step_floor, rates
work, rounds, torch_line, bf16_gemm, libraries, dims, orderings = sys.argv[1:]
rounds, two_libraries = int(rounds), int(libraries) > 1
dims = [int(d) for d in dims.split(",")]
nnz = int(re.search(r"nnz (\d+)", torch_line).group(1))
n = int(re.search(r"nodes (\d+)", torch_line).group(1))
torch = float(re.search(r"epoch_median_s ([0-9.]+)", torch_line).group(1))

def rows(path):
    return [r for r in map(json.loads, open(path)) if r.get("kind") == "epoch"]

def median_step(path):
    # Training step (forward, loss, backward, Adam) of epochs 2..10: what the PyTorch script times.
    return statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in rows(path)[1:])

def median_phases(path):
    # The step's GEMM, SpMM and loss seconds (the trainer's phase timers) over epochs 2..9: the last
    # epoch's timers include its evaluation.
    return [statistics.median(r["phases"][k]["max_s"] for r in rows(path)[1:-1]) for k in ("gemm", "spmm", "loss")]

def ceilings(r):
    return " ; ".join(open(f"{work}/gemm-{r}.txt").read().split("\n")).strip(" ;"), open(f"{work}/stream-{r}.txt").read()

steps, blas_steps, floors, gather_floors = [], [], [], []
for r in range(1, rounds + 1):
    gemm_line, stream_line = ceilings(r)
    floor, _ = describe(n, nnz, dims, gemm_line, stream_line)
    steps.append(median_step(f"{work}/metrics-{r}.jsonl"))
    floors.append(floor)
    # The same floor with the SpMM reading a row of X per nonzero (X does not stay in cache here).
    rate, bandwidth = rates(gemm_line, stream_line)
    _, flops, _ = step_floor(n, nnz, dims, rate, bandwidth)
    gather_floors.append(flops / rate + spmm_gathered_bytes(n, nnz, dims) / bandwidth)
    line = (f"round {r}: floor {floor:.4f} s, Tessera {steps[-1]:.3f} s = {steps[-1] / floor:.2f}x "
            f"({steps[-1] / gather_floors[-1]:.2f}x with the SpMM's gathers, {gather_floors[-1]:.4f} s)")
    if two_libraries:
        blas_steps.append(median_step(f"{work}/metrics-blas-{r}.jsonl"))
        line += f"; BLAS GEMMs {blas_steps[-1]:.3f} s = {blas_steps[-1] / floor:.2f}x ({blas_steps[-1] / steps[-1]:.2f}x the default)"
    print(line)
# The round whose step is the median one (the lower middle for an even count) gives the tables.
middle = sorted(range(rounds), key=lambda i: steps[i])[(rounds - 1) // 2] + 1
gemm_line, stream_line = ceilings(middle)
tessera = statistics.median(steps)
_, text = describe(n, nnz, dims, gemm_line, stream_line)
print(f"\nPyTorch median epoch   {torch:.3f} s")
print(f"Tessera median epoch   {tessera:.3f} s   -> {torch / tessera:.2f}x faster (target >= 3x)")
print(f"machine floor          {text}   (round {middle})")
print(f"Tessera / floor        {statistics.median(s / f for s, f in zip(steps, floors)):.2f}x "
      f"(median over {rounds} round(s) of each round's step / its floor)")
print(f"Tessera / gather floor {statistics.median(s / f for s, f in zip(steps, gather_floors)):.2f}x "
      f"(the same with the floor's SpMM reading a row of X per nonzero)")
print("\n".join([f"Tessera's step by phase (round {middle}, medians of epochs 2-9):"] +
                phase_table(n, nnz, dims, gemm_line, stream_line, median_phases(f"{work}/metrics-{middle}.jsonl"),
                            steps[middle - 1])))
if two_libraries:
    blas = statistics.median(blas_steps)
    print(f"\nTessera, BLAS GEMMs    {blas:.3f} s   -> {statistics.median(b / s for b, s in zip(blas_steps, steps)):.2f}x "
          f"the default step, {statistics.median(b / f for b, f in zip(blas_steps, floors)):.2f}x the floor (medians of rounds)")
    print("\n".join([f"BLAS step by phase (round {middle}):"] +
                    phase_table(n, nnz, dims, gemm_line, stream_line,
                                median_phases(f"{work}/metrics-blas-{middle}.jsonl"), blas_steps[middle - 1])))
shape_gemm, shape_rows = shape_floor(n, dims, open(f"{work}/shapes.txt").read().splitlines())
gemm_rate, bandwidth = rates(gemm_line, stream_line)
floor, flops, spmm_bytes = step_floor(n, nnz, dims, gemm_rate, bandwidth)
print(f"\nThe step's GEMMs, each at the best rate either library reached on its shape: {shape_gemm:.4f} s "
      f"({flops / shape_gemm / 1e9:.1f} GFLOP/s; the floor's {flops / gemm_rate:.4f} s at {gemm_rate / 1e9:.0f})")
print("\n".join(shape_rows))
shaped = shape_gemm + spmm_bytes / bandwidth
print(f"floor with those GEMM times: {shaped:.4f} s; Tessera's step (round {middle}) {steps[middle - 1] / shaped:.2f}x it, "
      f"its GEMM phase {median_phases(f'{work}/metrics-{middle}.jsonl')[0] / shape_gemm:.2f}x their sum")
reachable = shape_gemm + spmm_gathered_bytes(n, nnz, dims) / bandwidth
print(f"and with a row of X read per nonzero: {reachable:.4f} s; Tessera's step (round {middle}) "
      f"{steps[middle - 1] / reachable:.2f}x it (the rest: loss and element-wise passes, in no floor)")
if bf16_gemm:
    bf16 = median_step(f"{work}/metrics-bf16.jsonl")
    floor16, text16 = describe(n, nnz, dims, bf16_gemm, stream_line)
    print(f"\nTessera bf16 GEMMs     {bf16:.3f} s   -> {tessera / bf16:.2f}x the fp32 step")
    print(f"bf16 floor             {text16}")
    print(f"Tessera bf16 / floor   {bf16 / floor16:.2f}x")
    print("\n".join(["bf16 step by phase:"] +
                    phase_table(n, nnz, dims, bf16_gemm, stream_line, median_phases(f"{work}/metrics-bf16.jsonl"), bf16)))
    # bf16 storage (features and kept activations) with bf16 GEMMs, each round against its own fp32 run.
    stored = [median_step(f"{work}/metrics-bf16-storage-{r}.jsonl") for r in range(1, rounds + 1)]
    spmm32 = [median_phases(f"{work}/metrics-{r}.jsonl")[1] for r in range(1, rounds + 1)]
    spmm16 = [median_phases(f"{work}/metrics-bf16-storage-{r}.jsonl")[1] for r in range(1, rounds + 1)]
    print(f"\nTessera, bf16 storage  {statistics.median(stored):.3f} s (--feature-dtype bf16 --activation-dtype bf16 "
          f"--gemm-dtype bf16) -> {statistics.median(s / f for s, f in zip(stored, floors)):.2f}x the fp32 floor; "
          f"SpMM phase {statistics.median(spmm16):.4f} s = {statistics.median(b / f for b, f in zip(spmm16, spmm32)):.2f}x "
          f"the fp32 run's (medians of rounds)")
if orderings:
    print(f"\nVertex orderings (tessera prep reorder; ceilings of round {middle}); each step a median of epochs 2-10:")
    print(f"  {'graph':6} {'order':7} {'edges near':>10} {'step s':>7} {'x floor':>7} {'SpMM s':>7} "
          f"{'x read-once':>11} {'x gathered':>10} {'SpMM gain':>9}")
    for name in ("rmat", "csbm"):
        info = open(f"{work}/info-{name}.txt").read()
        g_n = int(re.search(r"nodes: +(\d+)", info).group(1))
        edges, loops = map(int, re.search(r"edges: +(\d+) \(\w+, (\d+) self loops", info).groups())
        g_nnz = edges + g_n - loops  # the step's nonzeros: a self loop added to every node that lacks one
        floor, _ = describe(g_n, g_nnz, dims, gemm_line, stream_line)
        _, _, once = step_floor(g_n, g_nnz, dims, gemm_rate, bandwidth)
        gathered = spmm_gathered_bytes(g_n, g_nnz, dims)
        base = None
        for order in ["none"] + orderings.split():
            step = median_step(f"{work}/order-{name}-{order}.jsonl")
            spmm = median_phases(f"{work}/order-{name}-{order}.jsonl")[1]
            base = base or spmm
            near = "-"
            if order != "none":
                m = re.search(r"-> ([0-9.]+)%", open(f"{work}/order-{name}-{order}.txt").read())
                near = f"{m.group(1)}%" if m else "?"
            print(f"  {name:6} {order:7} {near:>10} {step:7.3f} {step / floor:7.2f} {spmm:7.4f} "
                  f"{spmm * bandwidth / once:11.2f} {spmm * bandwidth / gathered:10.2f} {base / spmm:8.2f}x")
    print("  (edges near: stored edges whose ends are within 1024 ids after the reordering)")
    for order in ("none", "metis"):
        rows = [r for r in map(json.loads, open(f"{work}/grid-{order}.jsonl")) if r.get("kind") == "epoch"]
        step = statistics.median(r["forward_s"] + r["backward_s"] + r["optimizer_s"] for r in rows[1:])
        spmm = statistics.median(r["phases"]["spmm"]["max_s"] for r in rows[1:-1])
        print(f"  csbm {order:6} on the 2x2x2 grid (8 ranks x 1 thread, epochs 2-4): step {step:.3f} s, SpMM {spmm:.4f} s")
PY
