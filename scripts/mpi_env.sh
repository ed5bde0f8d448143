# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the scripts that launch MPI jobs. Sets TESSERA_LAUNCHER to the launcher for this machine
# (unless the caller set it): `srun` inside a Slurm allocation, `mpiexec --oversubscribe` with Open MPI,
# plain `mpiexec` with MPICH (Hydra runs more ranks than cores by itself) or any other. Open MPI's own
# settings are made only where Open MPI is the MPI: running as root in a container, more ranks than cores
# (tests use 8 ranks on 2 cores), no binding of each rank to one core. Threads are left to Tessera's
# default (the node's CPUs shared by its ranks) unless the caller set OMP_NUM_THREADS.
mpi_flavour=other
if mpiexec --version 2>/dev/null | grep -qi "open mpi\|openrte"; then
  mpi_flavour=openmpi
elif mpiexec --version 2>/dev/null | grep -qi "hydra\|mpich"; then
  mpi_flavour=mpich
fi
if [ -z "${TESSERA_LAUNCHER:-}" ]; then
  if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null; then
    TESSERA_LAUNCHER=srun
  elif [ "$mpi_flavour" = openmpi ]; then
    TESSERA_LAUNCHER="mpiexec --oversubscribe"
  else
    TESSERA_LAUNCHER=mpiexec
  fi
fi
export TESSERA_LAUNCHER
if [ "$mpi_flavour" = openmpi ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  # Shared-memory messages in one copy (CMA, process_vm_readv) where the container allows it: measured
  # 1.5-1.9x -> 1.3-1.45x for 2 ranks x 1 thread vs 1 rank x 2 threads (scripts/bench_grid.sh). Without
  # CAP_SYS_PTRACE or with Yama ptrace_scope > 0 it would fail at the first large message: two copies then.
  if [ -z "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" ]; then
    cma=none
    caps=$(awk '/^CapEff:/ {print $2}' /proc/self/status 2>/dev/null || true)
    scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
    if [ -n "$caps" ] && (( (16#$caps >> 19) & 1 )) && [ "$scope" = 0 ]; then cma=cma; fi
    export OMPI_MCA_btl_vader_single_copy_mechanism=$cma
  fi
  # Open MPI binds each rank to one core when ranks <= 2: a 1-rank x 2-thread run would share one core.
  export OMPI_MCA_hwloc_base_binding_policy=none
fi
