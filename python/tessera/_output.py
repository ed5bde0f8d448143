# SPDX-License-Identifier: BSD-3-Clause
"""The output policy every writer follows, as the C++ writers do (core/paths.hpp): the output's target is its
path with every symbolic link followed, so a link is written through and never replaced; an existing target
that is not a regular file (a FIFO, a device, a socket) is refused before any work; the data goes to a
temporary beside the target, which is flushed to disk, renamed onto the target, and the folder's entry
flushed, so that a crash leaves the old file or the new one."""
import contextlib
import os
import stat


def file_kind(path):
    """"a FIFO", "a character device", ... for an existing path (links followed), None for a missing one."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    for test, kind in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def output_target(path, what):
    """The file an output named `path` becomes; ValueError when it exists and is not a regular file or its
    folder does not exist."""
    path = os.fspath(path)
    kind = file_kind(path)
    if kind == "a directory":
        raise ValueError(f"{path}: {what} names a directory; give a file name")
    if kind not in (None, "a regular file"):
        raise ValueError(f"{path}: {what} names {kind}, not a regular file (an output replaces a regular file "
                         "only; give a file's path)")
    target = os.path.realpath(path)
    if not os.path.isdir(os.path.dirname(target)):
        raise ValueError(f"{path}: cannot write {what} (No such file or directory)")
    return target


def _fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError as e:  # file systems that cannot sync a directory
        if not directory:
            raise ValueError(f"{path}: cannot flush the written file to disk ({e.strerror})") from None
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path, what):
    """Yields the temporary to write; on a clean exit commits it onto the target, else removes it."""
    target = output_target(path, what)
    temp = f"{target}.tmp-{os.getpid()}"
    try:
        yield temp
        _fsync_path(temp)
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.remove(temp)
    _fsync_path(os.path.dirname(target), directory=True)
