# SPDX-License-Identifier: BSD-3-Clause
"""Loading the pickle-based formats (Planetoid's ind.* files, the GNN-benchmark npz files with pickled scipy
matrices) without running code from the file: an unpickler that builds only NumPy arrays, SciPy sparse
matrices and plain containers. A pickle is a program; an ordinary `pickle.load` of a downloaded file runs any
function the file names (os.system, say). This one refuses every name outside the list below with a
ValueError naming the file, so converting an untrusted file cannot do more than fail."""
import _compat_pickle
import io
import pickle
import zipfile

import numpy as np

_SPARSE = [f"{kind}_{shape}" for kind in ("csr", "csc", "coo", "lil", "dia", "bsr") for shape in ("matrix", "array")]
# (module, name) after Python 2's names are mapped to Python 3's, as pickle maps them.
ALLOWED = {
    *{(f"numpy.{core}.multiarray", name) for core in ("core", "_core") for name in ("_reconstruct", "scalar")},
    *{(f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")},
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("_codecs", "encode"),  # how protocol 2 spells a bytes object: codecs.encode(text, "latin1")
    ("copyreg", "_reconstructor"),  # Python 2's new-style instances: the class it gets is checked here too
    ("collections", "defaultdict"), ("collections", "OrderedDict"),
    *{("builtins", name) for name in ("list", "dict", "set", "frozenset", "tuple", "int", "float", "complex",
                                      "bool", "str", "bytes", "bytearray", "object", "slice")},
    *{(f"scipy.sparse.{module}", cls) for cls in _SPARSE
      for module in (cls.split("_")[0], "_" + cls.split("_")[0], "_arrays")},
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the names in ALLOWED."""

    def __init__(self, file, source):
        super().__init__(file, encoding="latin1")
        self.source = source

    def find_class(self, module, name):
        mapped_module, mapped_name = module, name
        if (module, name) in _compat_pickle.NAME_MAPPING:
            mapped_module, mapped_name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            mapped_module = _compat_pickle.IMPORT_MAPPING[module]
        if (mapped_module, mapped_name) not in ALLOWED:
            raise ValueError(f"{self.source}: the pickle names {module}.{name}, which is not a NumPy or SciPy "
                             "type of this format; refused (loading it could run code from the file)")
        return super().find_class(module, name)


def load_pickle(path):
    """The object pickled in the file at `path`, through RestrictedUnpickler; ValueError on anything else."""
    with open(path, "rb") as f:
        try:
            return RestrictedUnpickler(f, path).load()
        except ValueError:
            raise
        except Exception as e:
            raise ValueError(f"{path}: not a readable pickle ({type(e).__name__}: {e})") from None


def load_npz(path):
    """Every array of an npz archive as a dict; object arrays (pickled) go through RestrictedUnpickler."""
    arrays = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                key = member[:-4] if member.endswith(".npy") else member
                arrays[key] = _read_npy(io.BytesIO(archive.read(member)), f"{path}: {member}")
    except ValueError:
        raise
    except Exception as e:
        raise ValueError(f"{path}: not a readable npz archive ({type(e).__name__}: {e})") from None
    return arrays


def _read_npy(f, source):
    version = np.lib.format.read_magic(f)
    header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = header(f)
    if not dtype.hasobject:
        f.seek(0)
        return np.lib.format.read_array(f, allow_pickle=False)
    value = RestrictedUnpickler(f, source).load()
    if not isinstance(value, np.ndarray) or value.shape != shape:
        raise ValueError(f"{source}: a pickled {type(value).__name__} where an array of shape {shape} belongs")
    return value
