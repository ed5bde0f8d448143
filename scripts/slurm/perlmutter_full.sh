#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Full-graph 3D training on Perlmutter GPU nodes (4 A100 per node): one MPI rank per GPU.
#   sbatch -A ACCOUNT -N 2 scripts/slurm/perlmutter_full.sh DATA.h5 [GRID]     (GRID default: auto)
# Build first on a login node: scripts/setup.sh --backend cuda (with Kokkos_ROOT set to the site's
# CUDA Kokkos module to use it instead of building one). Not run from this repository's CI.
#SBATCH -C gpu
#SBATCH -q regular
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH -J tessera-full
set -euo pipefail
data=${1:?usage: sbatch perlmutter_full.sh DATA.h5 [GRID]}
grid=${2:-auto}
# A module that does not load stops the job, naming it (a silent failure would run without its library).
for module in PrgEnv-gnu cudatoolkit craype-accel-nvidia80 cray-hdf5-parallel; do
  module load "$module" || { echo "perlmutter_full.sh: module load $module failed" >&2; exit 1; }
done
# The binary as in cpu_full.sh: $TESSERA, $TESSERA_ROOT/build-cuda/apps/tessera, PATH, or the submit directory.
tessera=${TESSERA:-${TESSERA_ROOT:+$TESSERA_ROOT/build-cuda/apps/tessera}}
tessera=${tessera:-$(command -v tessera || echo "${SLURM_SUBMIT_DIR:-.}/build-cuda/apps/tessera")}
[ -x "$tessera" ] || { echo "perlmutter_full.sh: no tessera at $tessera; set TESSERA_ROOT or TESSERA, or put tessera on PATH" >&2; exit 1; }
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-32} OMP_PROC_BIND=spread OMP_PLACES=threads
export MPICH_GPU_SUPPORT_ENABLED=1           # device buffers in MPI collectives
export NCCL_NET_GDR_LEVEL=PHB                # GPUDirect RDMA through the Slingshot NICs
export FI_CXI_DISABLE_HOST_REGISTER=1 FI_MR_CACHE_MONITOR=userfaultfd
# Ranks of one node are consecutive, so the Y axis (innermost) stays on NVLink (--machine perlmutter).
# SIGUSR1 three minutes before the time limit (or `scancel --signal=USR1 JOB`): every rank stops at the end
# of the epoch, checkpoints and exits 75; submitting the same job again resumes from the checkpoint.
# Keyed by the data file and the arguments: a job on another graph never resumes this one's checkpoint.
key=$(printf '%s\n' "$(realpath "$data")" "$@" | sha1sum | cut -c1-10)
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-$(basename "$data" .h5)-$key}
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --gpus-per-task=1 --gpu-bind=closest "$tessera" train --data "$data" --grid "$grid" \
  --machine perlmutter --model gcn --layers 3 --hidden 256 --epochs 100 --eval-every 10 \
  --metrics "tessera-${SLURM_JOB_ID}.jsonl" \
  --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
