# SPDX-License-Identifier: BSD-3-Clause
"""Loading the C++ bindings (tessera._tessera) once per process, with one MPI and one HDF5 in it.

MPI comes from mpi4py (imported first, so that it initializes and finalizes MPI); Kokkos is finalized at exit,
before mpi4py finalizes MPI. The bindings link the parallel HDF5 (libhdf5_openmpi), so h5py must be Debian's MPI
build (python3-h5py-mpi) in a process that loads them: the package selects it before h5py is imported.
"""
import atexit
import importlib.util
import os
import sys

_bindings = None


def bindings_available():
    """Whether this installation has the compiled bindings (without loading them)."""
    return importlib.util.find_spec("tessera._tessera") is not None


def select_parallel_h5py():
    """Make `import h5py` load the MPI build, as the bindings' HDF5 is the parallel one."""
    os.environ.setdefault("H5PY_ALWAYS_USE_MPI", "1")


def bindings():
    """The loaded extension module; raises ImportError naming what is missing."""
    global _bindings
    if _bindings is not None:
        return _bindings
    if not bindings_available():
        raise ImportError("tessera was installed without its C++ bindings (the converters and tessera data work "
                          "without them; training does not): build them with `bash scripts/setup.sh` (which "
                          "builds build/python), then `TESSERA_BUILD_DIR=$PWD/build pip install "
                          "--no-build-isolation ./python`, or run with PYTHONPATH=build/python "
                          "(docs/guide/python.md)")
    h5py = sys.modules.get("h5py")
    if h5py is not None and not h5py.get_config().mpi:
        raise ImportError("h5py was imported with the serial HDF5 before tessera's bindings, which use the parallel "
                          "one: import tessera before h5py, or set H5PY_ALWAYS_USE_MPI=1 (needs python3-h5py-mpi)")
    from mpi4py import MPI  # noqa: F401  (initializes MPI; mpi4py finalizes it at exit)
    from . import _tessera
    atexit.register(_tessera.finalize)  # runs before mpi4py's own exit handler, registered earlier
    _bindings = _tessera
    return _bindings
