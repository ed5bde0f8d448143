# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the scripts that launch MPI jobs on a workstation or CI box: lets OpenMPI run as root in a
# container, more ranks than cores (tests use 8 ranks on 2 cores), one OpenMP thread per rank unless
# the caller chose otherwise. On a cluster use the site's launcher and settings instead.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Shared-memory messages in one copy (CMA, process_vm_readv) where the container allows it: measured 1.5-1.9x
# -> 1.3-1.45x for 2 ranks x 1 thread vs 1 rank x 2 threads (scripts/bench_grid.sh). Without CAP_SYS_PTRACE
# or with Yama ptrace_scope > 0 it would fail at the first large message, so fall back to two copies.
if [ -z "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" ]; then
  cma=none
  caps=$(awk '/^CapEff:/ {print $2}' /proc/self/status 2>/dev/null || true)
  scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
  if [ -n "$caps" ] && (( (16#$caps >> 19) & 1 )) && [ "$scope" = 0 ]; then cma=cma; fi
  export OMPI_MCA_btl_vader_single_copy_mechanism=$cma
fi
# OpenMPI binds each rank to one core when ranks <= 2: a 1-rank x 2-thread run would share one core.
export OMPI_MCA_hwloc_base_binding_policy=none
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
