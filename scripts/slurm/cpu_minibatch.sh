#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Mini-batch training on a 4D grid on CPU nodes: one MPI rank per task.
#   sbatch -n RANKS [-c THREADS] scripts/slurm/cpu_minibatch.sh DATA.h5 GRID [BATCH] [EPOCHS]
# GRID is DxXxYxZ with D x X x Y x Z = RANKS; BATCH a vertex count or a fraction (default 0.1). The CPU
# variant of perlmutter_minibatch.sh / frontier_minibatch.sh (same checkpoint-on-signal contract).
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH -J tessera-cpu-minibatch
set -euo pipefail
data=${1:?usage: sbatch cpu_minibatch.sh DATA.h5 GRID [BATCH] [EPOCHS]}
grid=${2:?usage: sbatch cpu_minibatch.sh DATA.h5 GRID [BATCH] [EPOCHS]}
batch=${3:-0.1}
epochs=${4:-100}
root=${TESSERA_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1} OMP_PROC_BIND=spread OMP_PLACES=threads
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-${SLURM_JOB_NAME:-job}}
mkdir -p "$ckpt"
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --mpi=pmix "${TESSERA:-$root/build/apps/tessera}" train --data "$data" --mode minibatch --grid "$grid" \
  --batch-size "$batch" --model gcn --layers 2 --hidden 64 --norm batch --epochs "$epochs" --eval-every 10 \
  --metrics "tessera-${SLURM_JOB_ID}.jsonl" --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
