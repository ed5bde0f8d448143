#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): exact inference for a sampled-mode model, layer-wise (tessera predict --engine
# layerwise: every node, each layer's halo rows fetched once) against the per-seed exact evaluation of
# --fanouts -1 (each batch of seeds expands its whole L-hop neighbourhood). For each graph size: an R-MAT
# graph of NODES nodes (8 edges per node, 128 features, 16 classes), METIS parts over RANKS ranks, a 3-layer
# GCN (hidden 64) trained one short epoch; then the wall time and peak memory per rank of (a) layer-wise
# inference over all nodes and (b) one evaluation of the validation and test nodes with fanouts -1,-1,-1
# in batches of BATCH seeds per rank, and the time per node of each.
#   scripts/bench_inference.sh [RANKS] [BATCH] [SIZES]      (defaults: 2, 1024, "65536 262144")
# EVAL_FRACTION=F makes the validation and the test split each a fraction F of the nodes (the rest train), so
# the per-seed pass evaluates few batches: its peak memory per rank is one batch's, whatever the count.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=${1:-2}
batch=${2:-1024}
sizes=${3:-65536 262144}
splits=()
if [ -n "${EVAL_FRACTION:-}" ]; then
  splits=(--valid-fraction "$EVAL_FRACTION" --train-fraction "$(python3 -c "print(1 - 2 * $EVAL_FRACTION)")")
fi
[ -x "$root/build/apps/tessera" ] || bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
tessera=$root/build/apps/tessera
work=$(mktemp -d /tmp/tessera-inference-XXXXXX)
trap 'rm -rf "$work"' EXIT
printf '%-9s %-34s %10s %12s %14s\n' nodes pass seconds "us/node" "peak MiB/rank"
for n in $sizes; do
  g=$work/g$n.h5
  mpiexec -n 2 "$tessera" prep synth --kind rmat --nodes "$n" --edges $((n * 8)) --features 128 --classes 16 \
    --seed 1 "${splits[@]}" -o "$g" >/dev/null
  "$tessera" partition --data "$g" --parts "$ranks" >/dev/null
  common=(--data "$g" --mode sampled --layers 3 --hidden 64 --batch-size "$batch" --steps-per-epoch 2 --epochs 1)
  mpiexec -n "$ranks" "$tessera" train "${common[@]}" --fanouts 15,10,5 --eval-every 0 --checkpoint "$work/ck$n" \
    --quiet >/dev/null
  out=$(mpiexec -n "$ranks" "$tessera" predict --checkpoint "$work/ck$n" --data "$g" --csv "$work/p.csv")
  seconds=$(sed -nE 's/.*\(forward ([0-9.]+) s, peak memory ([0-9.]+) MiB.*/\1/p' <<<"$out")
  peak=$(sed -nE 's/.*\(forward ([0-9.]+) s, peak memory ([0-9.]+) MiB.*/\2/p' <<<"$out")
  awk -v n="$n" -v s="$seconds" -v p="$peak" \
    'BEGIN { printf "%-9d %-34s %10.3f %12.2f %14.1f\n", n, "layer-wise, all nodes", s, 1e6 * s / n, p }'
  # One epoch of two steps, then one evaluation of valid + test with every neighbour of every seed.
  out=$(mpiexec -n "$ranks" "$tessera" train "${common[@]}" --fanouts -1,-1,-1 --eval-every 1 --final-eval sampled \
    --metrics "$work/m.jsonl")
  evaluated=$(python3 -c "import h5py; f=h5py.File('$g'); print(len(f['split/valid']) + len(f['split/test']))" \
    2>/dev/null || /usr/bin/python3 -c "import h5py; f=h5py.File('$g'); print(len(f['split/valid']) + len(f['split/test']))")
  seconds=$(grep '"kind":"epoch"' "$work/m.jsonl" | sed -E 's/.*"eval_s":([0-9.e+-]+).*/\1/')
  peak=$(tail -n 1 <<<"$out" | sed -nE 's/.*peak memory ([0-9.]+) MiB per rank.*/\1/p')
  awk -v n="$n" -v s="$seconds" -v p="$peak" -v e="$evaluated" -v b="$batch" \
    'BEGIN { printf "%-9d %-34s %10.3f %12.2f %14.1f\n", n, "per seed, fanouts -1 (" e " nodes)", s, 1e6 * s / e, p }'
done
