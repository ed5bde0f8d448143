#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Partition-parallel sampled training (GraphSAGE, prefetch cache) on CPU nodes: one replica per rank.
#   sbatch -n RANKS [-c THREADS] scripts/slurm/cpu_sampled.sh DATA.h5 [FANOUTS] [EPOCHS]
# Partitions the graph for RANKS first when the file has no metis-RANKS partition (one METIS run on one
# rank, stored in the file). Checkpoint-on-signal as in cpu_full.sh.
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH -J tessera-cpu-sampled
set -euo pipefail
data=${1:?usage: sbatch cpu_sampled.sh DATA.h5 [FANOUTS] [EPOCHS]}
fanouts=${2:-10,10}
epochs=${3:-30}
root=${TESSERA_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
tessera=${TESSERA:-$root/build/apps/tessera}
ranks=${SLURM_NTASKS:?run under sbatch}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1} OMP_PROC_BIND=spread OMP_PLACES=threads
if [ "$ranks" -gt 1 ] && ! h5ls "$data/partition/metis-$ranks" >/dev/null 2>&1; then
  srun --mpi=pmix -n 1 "$tessera" partition --data "$data" --parts "$ranks"
fi
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-${SLURM_JOB_NAME:-job}}
mkdir -p "$ckpt"
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --mpi=pmix "$tessera" train --data "$data" --mode sampled --model sage --layers 2 --hidden 64 \
  --fanouts "$fanouts" --batch-size 64 --prefetch-policy adaptive --epochs "$epochs" --eval-every 10 \
  --metrics "tessera-${SLURM_JOB_ID}.jsonl" --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
