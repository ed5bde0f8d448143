#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Partition-parallel sampled training (GraphSAGE, prefetch cache) on CPU nodes: one replica per rank.
#   sbatch -n RANKS [-c THREADS] scripts/slurm/cpu_sampled.sh DATA.h5 [FANOUTS] [EPOCHS]
# Partitions the graph for RANKS first (one METIS run on one rank) into a file of its own next to the job's
# outputs, keyed by the data file, so a shared read-only graph is never written; later jobs reuse it. The
# binary, the checkpoint directory and the checkpoint-on-signal contract as in cpu_full.sh.
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH -J tessera-cpu-sampled
set -euo pipefail
data=${1:?usage: sbatch cpu_sampled.sh DATA.h5 [FANOUTS] [EPOCHS]}
fanouts=${2:-10,10}
epochs=${3:-30}
tessera=${TESSERA:-${TESSERA_ROOT:+$TESSERA_ROOT/build/apps/tessera}}
tessera=${tessera:-$(command -v tessera || echo "${SLURM_SUBMIT_DIR:-.}/build/apps/tessera")}
[ -x "$tessera" ] || { echo "cpu_sampled.sh: no tessera at $tessera; set TESSERA_ROOT or TESSERA, or put tessera on PATH" >&2; exit 1; }
ranks=${SLURM_NTASKS:?run under sbatch}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1} OMP_PROC_BIND=spread OMP_PLACES=threads
graph_key=$(realpath "$data" | sha1sum | cut -c1-10)
partition=(--partition block)
if [ "$ranks" -gt 1 ]; then
  parts=tessera-partition-$(basename "$data" .h5)-$graph_key-metis-$ranks.h5
  [ -f "$parts" ] || srun --mpi=pmix -n 1 "$tessera" partition --data "$data" --parts "$ranks" --output "$parts"
  partition=(--partition "metis-$ranks" --partition-file "$parts")
fi
options=(--mode sampled --model sage --layers 2 --hidden 64 --fanouts "$fanouts" --batch-size 64
         --prefetch-policy adaptive --eval-every 10 "${partition[@]}")
key=$(printf '%s\n' "$(realpath "$data")" "${options[@]}" | sha1sum | cut -c1-10)
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-$(basename "$data" .h5)-$key}
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --mpi=pmix "$tessera" train --data "$data" "${options[@]}" --epochs "$epochs" \
  --metrics "tessera-${SLURM_JOB_ID}.jsonl" --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
