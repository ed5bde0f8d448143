# SPDX-License-Identifier: BSD-3-Clause
"""Reading the tensors of a PyTorch file without PyTorch and without running code from the file, as OGB's
link-prediction splits (split/NAME/{train,valid,test}.pt) are stored. `torch.save`'s zip format (PyTorch 1.6
and later) holds one pickle (ARCHIVE/data.pkl) whose tensors refer by key to raw little-endian storages
(ARCHIVE/data/KEY); the format before it is a sequence of pickles (a magic number, the protocol 1001, the
saving system's sizes, the object, the storage keys) followed by each storage as an int64 element count
and its bytes. The unpickler here resolves only torch's tensor-rebuilding function, its storage types and
plain containers, and builds NumPy arrays."""
import collections
import pickle
import struct
import zipfile

import numpy as np

# torch's legacy storage classes (the type a storage is pickled under) and the dtype of their elements.
STORAGE_DTYPES = {"DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
                  "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
                  "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_}


class _StorageType:
    """A storage class the pickle names (torch.LongStorage, ...): the dtype of its elements."""

    def __init__(self, name):
        self.name, self.dtype = name, np.dtype(STORAGE_DTYPES[name])


def _rebuild_tensor(storage, offset, size, stride, *_):
    """torch._utils._rebuild_tensor_v2: a view of `storage` (a 1-D array) as an array of `size`."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if not size:
        return storage[offset].copy()
    itemsize = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size,
                                           strides=tuple(s * itemsize for s in stride), writeable=False)
    return np.array(view)


class _TorchUnpickler(pickle.Unpickler):
    def __init__(self, file, archive, prefix, source):
        super().__init__(file)
        self.archive, self.prefix, self.source = archive, prefix, source

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "builtins" and name in ("list", "dict", "tuple", "int", "float", "str", "bool", "set"):
            return super().find_class(module, name)
        raise ValueError(f"{self.source}: the pickle names {module}.{name}, which is not a tensor type of a "
                         "saved PyTorch file; refused (loading it could run code from the file)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise ValueError(f"{self.source}: an object reference {pid!r:.80} that is not a tensor storage")
        storage_type, key, numel = pid[1], str(pid[2]), int(pid[4])
        if not isinstance(storage_type, _StorageType):
            raise ValueError(f"{self.source}: a storage of type {storage_type!r:.80}")
        dtype = storage_type.dtype
        try:
            data = self.archive.read(f"{self.prefix}/data/{key}")
        except KeyError:
            raise ValueError(f"{self.source}: storage {key} is missing from the archive") from None
        if len(data) < numel * dtype.itemsize:
            raise ValueError(f"{self.source}: storage {key} holds {len(data)} bytes, not {numel} x {dtype}")
        return np.frombuffer(data[:numel * dtype.itemsize], dtype=dtype.newbyteorder("<"))


LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class _LazyTensor:
    """A tensor of the legacy format, whose storage's bytes come after the pickle."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


class _LegacyUnpickler(_TorchUnpickler):
    """The legacy format's object pickle: storages are (key, dtype, numel) until their bytes are read."""

    def __init__(self, file, source):
        super().__init__(file, None, "", source)

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return lambda storage, offset, size, stride, *_: _LazyTensor(storage, offset, size, stride)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and
                isinstance(pid[1], _StorageType)):
            raise ValueError(f"{self.source}: an object reference {pid!r:.80} that is not a tensor storage")
        if len(pid) > 5 and pid[5] is not None:
            raise ValueError(f"{self.source}: a storage view (saved by an old PyTorch); not read")
        return (str(pid[2]), pid[1].dtype, int(pid[4]))


def _resolve(obj, storages):
    """`obj` with its lazy tensors made arrays."""
    if isinstance(obj, _LazyTensor):
        key, dtype, _ = obj.storage
        return _rebuild_tensor(storages[key], obj.offset, obj.size, obj.stride)
    if isinstance(obj, dict):
        return type(obj)((k, _resolve(v, storages)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_resolve(v, storages) for v in obj)
    return obj


def _load_legacy(f, path):
    plain = lambda: _TorchUnpickler(f, None, "", path).load()
    if plain() != LEGACY_MAGIC or plain() != 1001:
        raise ValueError(f"{path}: not a PyTorch file (neither a zip archive nor the legacy format's header)")
    info = plain()
    if not isinstance(info, dict) or not info.get("little_endian", False):
        raise ValueError(f"{path}: saved on a big-endian system; not read")
    obj = _LegacyUnpickler(f, path).load()
    keys = plain()
    wanted = {}
    _collect(obj, wanted)
    storages = {}
    for key in keys:
        numel = struct.unpack("<q", f.read(8))[0]
        dtype = wanted[str(key)][0] if str(key) in wanted else None
        if dtype is None:
            raise ValueError(f"{path}: storage {key} is not referred to by the object")
        data = f.read(numel * dtype.itemsize)
        if len(data) < numel * dtype.itemsize:
            raise ValueError(f"{path}: storage {key} is cut short (truncated file?)")
        storages[str(key)] = np.frombuffer(data, dtype=dtype.newbyteorder("<"))
    missing = sorted(set(wanted) - set(storages))
    if missing:
        raise ValueError(f"{path}: storage {missing[0]} is missing from the file")
    return _resolve(obj, storages)


def _collect(obj, wanted):
    """The storages `obj`'s lazy tensors refer to: key -> (dtype, numel)."""
    if isinstance(obj, _LazyTensor):
        key, dtype, numel = obj.storage
        wanted[key] = (dtype, numel)
    elif isinstance(obj, dict):
        for v in obj.values():
            _collect(v, wanted)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _collect(v, wanted)


def load_torch_file(path):
    """The object saved in the PyTorch file at `path`, its tensors as NumPy arrays; ValueError naming the file
    for anything else."""
    try:
        if not zipfile.is_zipfile(path):
            with open(path, "rb") as f:
                return _load_legacy(f, path)
        with zipfile.ZipFile(path) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise ValueError(f"{path}: a zip archive without one ARCHIVE/data.pkl; not a PyTorch file")
            prefix = pickles[0][:-len("/data.pkl")]
            byteorder = f"{prefix}/byteorder"
            if byteorder in archive.namelist() and archive.read(byteorder).strip() != b"little":
                raise ValueError(f"{path}: big-endian storages are not read")
            with archive.open(pickles[0]) as f:
                return _TorchUnpickler(f, archive, prefix, path).load()
    except ValueError:
        raise
    except Exception as e:
        raise ValueError(f"{path}: not a readable PyTorch file ({type(e).__name__}: {e})") from None
