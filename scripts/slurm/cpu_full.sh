#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Full-graph 3D training on CPU nodes: one MPI rank per task, OpenMP threads per rank from --cpus-per-task.
#   sbatch -n RANKS [-c THREADS] scripts/slurm/cpu_full.sh DATA.h5 [GRID] [EPOCHS]   (GRID default: auto)
# The CPU variant of perlmutter_full.sh / frontier_full.sh, with the same checkpoint-on-signal contract:
# SIGUSR1 (--signal=USR1@180 below, or `scancel --signal=USR1 JOB`) stops every rank at the end of an epoch,
# writes the checkpoint and exits 75; submitting the same job again resumes from it.
# Run under a real Slurm by scripts/slurm/check_local.sh (tests/cli case slurm_jobs).
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH -J tessera-cpu-full
set -euo pipefail
data=${1:?usage: sbatch cpu_full.sh DATA.h5 [GRID] [EPOCHS]}
grid=${2:-auto}
epochs=${3:-100}
root=${TESSERA_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1} OMP_PROC_BIND=spread OMP_PLACES=threads
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-${SLURM_JOB_NAME:-job}}
mkdir -p "$ckpt"
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --mpi=pmix "${TESSERA:-$root/build/apps/tessera}" train --data "$data" --grid "$grid" \
  --model gcn --layers 2 --hidden 64 --epochs "$epochs" --eval-every 10 \
  --metrics "tessera-${SLURM_JOB_ID}.jsonl" --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
