#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): full-graph GAT training steps, Tessera against a PyTorch CPU GAT written as PyG's
# GATConv computes it (scripts/torch_gat.py: index ops, scatter max and sum) on the same generated
# ogbn-arxiv-shaped graph (169,343 nodes, R-MAT, symmetrized, 128 features, 40 classes); the GAT paper's
# model: 2 layers, 8 heads x 8 hidden concatenated, one averaged output head; 10 epochs, 1 rank x THREADS
# threads. Prints both median steps, their ratio, and the step's floor on this machine (scripts/gat_floor.py:
# the GEMMs at the rate `tessera bench gemm` measures, every pass over edges and nodes as bytes at the
# bandwidth `tessera bench stream` measures, per head). Then the 2x2x2 grid (8 ranks x 1 thread): the bytes
# the busiest rank moved in a training epoch, by collective, beside what `tessera plan` predicts for it
# (times are not judged: 8 ranks share the machine's cores).
#   scripts/bench_gat.sh [THREADS]        (default 2; installs PyTorch through setup.sh --with-bench)
# ROUNDS=R (default 1) alternates Tessera's run and the floor's measurements R times and reports the medians.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=${1:-2}
rounds=${ROUNDS:-1}
case "$rounds" in '' | *[!0-9]* | 0) echo "bench_gat.sh: ROUNDS must be a positive whole number, not '$rounds'" >&2; exit 2 ;; esac
bash "$root/scripts/setup.sh" --with-bench >/dev/null
source "$root/scripts/mpi_env.sh"
tessera=$root/build/apps/tessera
work=$(mktemp -d /tmp/tessera-bench-gat-XXXXXX)
trap 'rm -rf "$work"' EXIT
graph=$work/arxiv-shaped.h5
nodes=169343 features=128 classes=40 layers=2 hidden=8 heads=8 output_heads=1 epochs=10

mpiexec -n 2 "$tessera" prep synth --kind rmat --nodes $nodes --edges 606000 --features $features \
  --classes $classes --seed 1 -o "$graph" | head -n 1
export OMP_NUM_THREADS=$threads
echo "== PyTorch GAT ($threads threads)"
torch_line=$(/usr/bin/python3 "$root/scripts/torch_gat.py" --h5 "$graph" --layers $layers --hidden $hidden \
  --heads $heads --output-heads $output_heads --epochs $epochs --threads "$threads")
echo "$torch_line"
model=(--model gat --layers $layers --hidden $hidden --heads $heads --output-heads $output_heads
       --dropout 0 --weight-decay 0 --lr 0.005)
for round in $(seq "$rounds"); do
  echo "== round $round of $rounds: Tessera (1 rank x $threads threads)"
  mpiexec -n 1 "$tessera" train --data "$graph" "${model[@]}" --epochs $epochs --eval-every $epochs \
    --metrics "$work/metrics-$round.jsonl" | tail -n 2
  echo "== round $round: machine ceilings"
  mpiexec -n 1 "$tessera" bench gemm --m $nodes --n $((heads * hidden)) --k $features | tee "$work/gemm-$round.txt"
  mpiexec -n 1 "$tessera" bench stream | tee "$work/stream-$round.txt"
done
echo "== the 2x2x2 grid, 8 ranks x 1 thread"
OMP_NUM_THREADS=1 mpiexec -n 8 "$tessera" train --data "$graph" --grid 2x2x2 "${model[@]}" --epochs 3 --eval-every 3 \
  --metrics "$work/grid.jsonl" | tail -n 1
mpiexec -n 1 "$tessera" plan --data "$graph" --ranks 8 --model gat --layers $layers --hidden $hidden --heads $heads \
  --output-heads $output_heads > "$work/plan.txt"

PYTHONPATH="$root/scripts" python3 - "$work" "$rounds" "$torch_line" "$features" "$hidden" "$heads" "$classes" \
  "$output_heads" "$layers" <<'PY'
import json, re, statistics, sys
from gat_floor import step_floor
from epoch_floor import rates
work, rounds, torch_line = sys.argv[1], int(sys.argv[2]), sys.argv[3]
features, hidden, heads, classes, output_heads, layers = (int(v) for v in sys.argv[4:10])
torch = float(re.search(r"epoch_median_s ([0-9.]+)", torch_line).group(1))
n = int(re.search(r"nodes (\d+)", torch_line).group(1))
e = int(re.search(r"edges (\d+)", torch_line).group(1))  # in-edges with the self loops
rows = lambda path: [json.loads(line) for line in open(path) if '"epoch"' in line]
steps, floors = [], []
for r in range(1, rounds + 1):
    steps.append(statistics.median(x["forward_s"] + x["backward_s"] + x["optimizer_s"]
                                   for x in rows(f"{work}/metrics-{r}.jsonl")[1:]))
    gemm_rate, bandwidth = rates(open(f"{work}/gemm-{r}.txt").read(), open(f"{work}/stream-{r}.txt").read())
    floor, flops, passes = step_floor(n, e, features, hidden, heads, classes, output_heads, layers, gemm_rate,
                                      bandwidth)
    floors.append(floor)
    print(f"round {r}: step {steps[-1]:.3f} s, floor {floor:.3f} s (GEMM {flops / 1e9:.1f} GFLOP at "
          f"{gemm_rate / 1e9:.0f} GFLOP/s + passes {passes / 1e9:.2f} GB at {bandwidth / 1e9:.1f} GB/s), "
          f"{steps[-1] / floor:.2f}x")
step = statistics.median(steps)
print(f"\nPyTorch GAT median epoch {torch:.3f} s")
print(f"Tessera GAT median step  {step:.3f} s   PyTorch / Tessera {torch / step:.2f}x")
print(f"step / floor             {statistics.median(s / f for s, f in zip(steps, floors)):.2f}x (median of rounds)")
second = rows(f"{work}/grid.jsonl")[1]  # epoch 2: a training epoch without evaluation
plan = next(line.split() for line in open(f"{work}/plan.txt") if len(line.split()) > 1 and line.split()[1] == "2x2x2")
print("2x2x2 grid, bytes of the busiest rank in epoch 2 (training only):",
      f"{second['bytes_max_rank'] / 1e6:.1f} MB;",
      ", ".join(f"{k[6:]} {second[k] / 1e6:.1f} MB"
                for k in sorted(k for k in second if k.startswith('bytes_') and k != 'bytes_max_rank')),
      f"; the performance model (tessera plan) {plan[7]} MB")
PY
