# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures of the bindings' tests, which every rank of `mpiexec -n P python3 -m pytest` runs in the same order
(run_tests.sh bindings P): the build tree's package first on the path, the run's shared work directory (Cora
converted there, and the `tessera` program's reference run on the same ranks)."""
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.environ["TESSERA_PYTHONPATH"])
import tessera  # noqa: E402  (before h5py: it selects the MPI build of h5py)
from mpi4py import MPI  # noqa: E402

COMM = MPI.COMM_WORLD
WORK = os.environ["TESSERA_TEST_WORK"]
CORA = os.path.join(WORK, "cora.h5")
CLI = os.path.join(WORK, "cli")


def grid():
    """The 3D grid the reference run used: 1x2x2 on 4 ranks, one rank otherwise."""
    return "1x2x2" if COMM.size == 4 else ""


@pytest.fixture(autouse=True)
def ranks_in_step():
    """Every test ends with every rank: one that failed on some ranks only does not leave the others waiting in
    the next test's collectives."""
    yield
    COMM.barrier()


@pytest.fixture
def cora():
    if not os.path.exists(CORA):
        pytest.skip("no Cora here (DATASETS names no folder holding cora/)")
    return CORA


@pytest.fixture
def shared_dir():
    """A directory every rank sees (made by rank 0)."""
    path = tempfile.mkdtemp(dir=WORK) if COMM.rank == 0 else None
    return COMM.bcast(path)
