#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Mini-batch training on a 4D grid on CPU nodes: one MPI rank per task.
#   sbatch -n RANKS [-c THREADS] scripts/slurm/cpu_minibatch.sh DATA.h5 GRID [BATCH] [EPOCHS]
# GRID is DxXxYxZ with D x X x Y x Z = RANKS; BATCH a vertex count or a fraction (default 0.1). The CPU
# variant of perlmutter_minibatch.sh / frontier_minibatch.sh; the binary, the checkpoint directory and the
# checkpoint-on-signal contract as in cpu_full.sh.
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH -J tessera-cpu-minibatch
set -euo pipefail
data=${1:?usage: sbatch cpu_minibatch.sh DATA.h5 GRID [BATCH] [EPOCHS]}
grid=${2:?usage: sbatch cpu_minibatch.sh DATA.h5 GRID [BATCH] [EPOCHS]}
batch=${3:-0.1}
epochs=${4:-100}
tessera=${TESSERA:-${TESSERA_ROOT:+$TESSERA_ROOT/build/apps/tessera}}
tessera=${tessera:-$(command -v tessera || echo "${SLURM_SUBMIT_DIR:-.}/build/apps/tessera")}
[ -x "$tessera" ] || { echo "cpu_minibatch.sh: no tessera at $tessera; set TESSERA_ROOT or TESSERA, or put tessera on PATH" >&2; exit 1; }
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1} OMP_PROC_BIND=spread OMP_PLACES=threads
options=(--mode minibatch --grid "$grid" --batch-size "$batch" --model gcn --layers 2 --hidden 64 --norm batch
         --eval-every 10)
key=$(printf '%s\n' "$(realpath "$data")" "${options[@]}" | sha1sum | cut -c1-10)
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-$(basename "$data" .h5)-$key}
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --mpi=pmix "$tessera" train --data "$data" "${options[@]}" --epochs "$epochs" \
  --metrics "tessera-${SLURM_JOB_ID}.jsonl" --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
