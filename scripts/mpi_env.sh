# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the scripts that launch MPI jobs on a workstation or CI box: lets OpenMPI run as root in a
# container, more ranks than cores (tests use 8 ranks on 2 cores), one OpenMP thread per rank unless
# the caller chose otherwise. On a cluster use the site's launcher and settings instead.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# OpenMPI binds each rank to one core when ranks <= 2: a 1-rank x 2-thread run would share one core.
export OMPI_MCA_hwloc_base_binding_policy=none
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
