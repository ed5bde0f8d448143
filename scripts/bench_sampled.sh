#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark (not a test): what the prefetch cache saves in partition-parallel sampled training (docs/architecture.md §6).
# An R-MAT graph of NODES nodes (default 2^20, 128 features), METIS-partitioned over RANKS ranks (default 8);
# a 3-layer GCN (hidden 64, fanouts 15,10,5, 128 seeds per rank per step), EPOCHS epochs of STEPS steps.
# For each controller (none, static, periodic, adaptive): remote rows and fetched rows / bytes per epoch, the
# cache hit rate, the fetch's own time, and the epoch time - measured as is, and again with
# --simulate-network 2,25 (a Slingshot-class link: 2 us, 25 GB/s; benchmark mode only). Epoch figures are
# means over epochs 2..EPOCHS (epoch 1 includes warm-up); the cache's one-time initial fill is listed apart.
#   scripts/bench_sampled.sh [RANKS] [NODES] [EPOCHS] [STEPS] [NETWORKS]
# NETWORKS: space-separated, "real" and/or LAT_US,GBPS values (default "real 2,25").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=${1:-8}
nodes=${2:-1048576}
epochs=${3:-3}
steps=${4:-16}
networks=${5:-real 2,25}
[ -x "$root/build/apps/tessera" ] || bash "$root/scripts/setup.sh"
source "$root/scripts/mpi_env.sh"
tessera=$root/build/apps/tessera
work=$(mktemp -d /tmp/tessera-sampled-XXXXXX)
trap 'rm -rf "$work"' EXIT
graph=$work/rmat.h5
mpiexec -n 2 "$tessera" prep synth --kind rmat --nodes "$nodes" --edges $((nodes * 8)) --features 128 --classes 16 \
  --seed 1 -o "$graph" | head -n 1
mpiexec -n 1 "$tessera" partition --data "$graph" --parts "$ranks"

for net in $networks; do
  for policy in none static periodic adaptive; do
    extra=()
    [ "$net" = real ] || extra=(--simulate-network "$net")
    mpiexec -n "$ranks" "$tessera" train --data "$graph" --mode sampled --layers 3 --hidden 64 --fanouts 15,10,5 \
      --batch-size 128 --steps-per-epoch "$steps" --epochs "$epochs" --eval-every 0 --prefetch-policy "$policy" \
      --metrics "$work/$policy-$net.jsonl" "${extra[@]}" >"$work/$policy-$net.log" 2>&1
    grep -o "initial fill [0-9]* B" "$work/$policy-$net.log" | sed "s/^/$policy $net: /"
  done
done

python3 - "$work" "$networks" <<'PY'
import json, sys
work, networks = sys.argv[1], sys.argv[2].split()
def epochs(policy, net):
    lines = [json.loads(l) for l in open(f"{work}/{policy}-{net}.jsonl")]
    return [l for l in lines if l.get("kind") == "epoch"][1:] or [l for l in lines if l.get("kind") == "epoch"]
def mean(rows, key):
    return sum(r[key] for r in rows) / len(rows)
print(f"\n{'policy':9} {'network':8} {'epoch s':>8} {'vs none':>8} {'remote rows':>12} {'hit rate':>8} "
      f"{'fetched rows':>12} {'fetched MB':>10} {'bytes vs none':>13} {'fetch s':>8} {'evictions':>9}")
for net in networks:
    base = epochs("none", net)
    for policy in ["none", "static", "periodic", "adaptive"]:
        e = epochs(policy, net)
        t, b = mean(e, "epoch_s"), mean(e, "fetched_bytes")
        print(f"{policy:9} {net:8} {t:8.2f} {100 * (t / mean(base, 'epoch_s') - 1):+7.1f}% "
              f"{mean(e, 'remote_rows'):12.0f} {mean(e, 'hit_rate'):8.3f} {mean(e, 'fetched_rows'):12.0f} "
              f"{b / 1e6:10.1f} {100 * (b / mean(base, 'fetched_bytes') - 1):+12.1f}% {mean(e, 'fetch_s'):8.3f} "
              f"{mean(e, 'evictions'):9.0f}")
PY
