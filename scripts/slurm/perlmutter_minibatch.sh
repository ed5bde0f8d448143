#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Mini-batch training on a 4D grid (docs/architecture.md §5) on Perlmutter GPU nodes (4 A100 per node): one rank per GPU.
#   sbatch -A ACCOUNT -N 4 scripts/slurm/perlmutter_minibatch.sh DATA.h5 GRID [BATCH]
# GRID is DxXxYxZ with D x X x Y x Z = ranks, e.g. 4x1x2x2 on 16 GPUs: four data-parallel replicas, each a
# 1x2x2 3D grid whose inner axes stay inside a node. BATCH: vertices per sample, a count or a fraction
# (default 0.1). Build first on a login node: scripts/setup.sh --backend cuda. Not run from this
# repository's CI.
#SBATCH -C gpu
#SBATCH -q regular
#SBATCH -t 00:30:00
#SBATCH --signal=USR1@180
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH -J tessera-minibatch
set -euo pipefail
data=${1:?usage: sbatch perlmutter_minibatch.sh DATA.h5 GRID [BATCH]}
grid=${2:?usage: sbatch perlmutter_minibatch.sh DATA.h5 GRID [BATCH]}
batch=${3:-0.1}
# A module that does not load stops the job, naming it (a silent failure would run without its library).
for module in PrgEnv-gnu cudatoolkit craype-accel-nvidia80 cray-hdf5-parallel; do
  module load "$module" || { echo "perlmutter_minibatch.sh: module load $module failed" >&2; exit 1; }
done
# The binary as in cpu_full.sh: $TESSERA, $TESSERA_ROOT/build-cuda/apps/tessera, PATH, or the submit directory.
tessera=${TESSERA:-${TESSERA_ROOT:+$TESSERA_ROOT/build-cuda/apps/tessera}}
tessera=${tessera:-$(command -v tessera || echo "${SLURM_SUBMIT_DIR:-.}/build-cuda/apps/tessera")}
[ -x "$tessera" ] || { echo "perlmutter_minibatch.sh: no tessera at $tessera; set TESSERA_ROOT or TESSERA, or put tessera on PATH" >&2; exit 1; }
# One core stays free per rank for the sampler thread, which builds the next batch during each step.
export OMP_NUM_THREADS=$(( ${SLURM_CPUS_PER_TASK:-32} - 1 )) OMP_PROC_BIND=spread OMP_PLACES=threads
export MPICH_GPU_SUPPORT_ENABLED=1           # device buffers in MPI collectives
export NCCL_NET_GDR_LEVEL=PHB                # GPUDirect RDMA through the Slingshot NICs
export FI_CXI_DISABLE_HOST_REGISTER=1 FI_MR_CACHE_MONITOR=userfaultfd
# SIGUSR1 three minutes before the time limit (or `scancel --signal=USR1 JOB`): every rank stops at the end
# of the epoch, checkpoints and exits 75; submitting the same job again resumes from the checkpoint.
# Keyed by the data file and the arguments: a job on another graph never resumes this one's checkpoint.
key=$(printf '%s\n' "$(realpath "$data")" "$@" | sha1sum | cut -c1-10)
ckpt=${TESSERA_CHECKPOINT:-tessera-checkpoint-$(basename "$data" .h5)-$key}
resume=()
[ -f "$ckpt/checkpoint.h5" ] && resume=(--resume)
srun --gpus-per-task=1 --gpu-bind=closest "$tessera" train --data "$data" --mode minibatch \
  --grid "$grid" --batch-size "$batch" --comm-dtype bf16 --model gcn --layers 3 --hidden 256 --norm batch \
  --epochs 100 --eval-every 10 --metrics "tessera-${SLURM_JOB_ID}.jsonl" \
  --checkpoint "$ckpt" --checkpoint-every 10 "${resume[@]}"
