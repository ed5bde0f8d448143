#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Full-graph 3D training on CPU nodes: one MPI rank per task, OpenMP threads per rank from --cpus-per-task.
#   sbatch -n RANKS [-c THREADS] scripts/slurm/cpu_full.sh DATA.h5 [GRID] [EPOCHS]   (GRID default: auto)
# The CPU variant of perlmutter_full.sh / frontier_full.sh, with the same checkpoint-on-signal contract:
# SIGUSR1 (--signal=USR1@180 below, or `scancel --signal=USR1 JOB`) stops every rank at the end of an epoch,
# writes the checkpoint and exits 75; submitting the same job (same data and options) again resumes from it.
# The binary: $TESSERA, else $TESSERA_ROOT/build/apps/tessera, else `tessera` on PATH, else
# build/apps/tessera under the directory sbatch was called from (sbatch runs a copy of this script, so its
# own path says nothing). The checkpoint directory is keyed by the data file and the options
# (TESSERA_CHECKPOINT overrides it); tessera train refuses to resume a checkpoint of another run.
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH -J tessera-cpu-full
set -euo pipefail
data=${1:?usage: sbatch cpu_full.sh DATA.h5 [GRID] [EPOCHS]}
grid=${2:-auto}
epochs=${3:-100}
tessera=${TESSERA:-${TESSERA_ROOT:+$TESSERA_ROOT/build/apps/tessera}}
tessera=${tessera:-$(command -v tessera || echo "${SLURM_SUBMIT_DIR:-.}/build/apps/tessera")}
[ -x "$tessera" ] || { echo "cpu_full.sh: no tessera at $tessera; set TESSERA_ROOT or TESSERA, or put tessera on PATH" >&2; exit 1; }
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1} OMP_PROC_BIND=spread OMP_PLACES=threads
options=(--grid "$grid" --model gcn --layers 2 --hidden 64 --eval-every 10)
key=$(printf '%s\n' "$(realpath "$data")" "${options[@]}" | sha1sum | cut -c1-10)
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-$(basename "$data" .h5)-$key}
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --mpi=pmix "$tessera" train --data "$data" "${options[@]}" --epochs "$epochs" \
  --metrics "tessera-${SLURM_JOB_ID}.jsonl" --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
