# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures of the Python package's tests: the source tree's package on the path, the `tessera` program
(TESSERA, else build/apps/tessera) and a small graph as arrays."""
import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))


def tessera_program():
    return os.environ.get("TESSERA", os.path.join(ROOT, "build", "apps", "tessera"))


@pytest.fixture
def program():
    """Runs `tessera ARGS...`; returns its output, fails the test with it on a non-zero exit."""
    program = tessera_program()
    if not os.access(program, os.X_OK):
        pytest.skip(f"no tessera program at {program} (build first)")

    def run(*args, ok=True):
        r = subprocess.run([program, *map(str, args)], capture_output=True, text=True)
        if ok and r.returncode != 0:
            pytest.fail(f"tessera {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r
    return run


def convert(*args):
    """`python3 -m tessera.convert ARGS...` with the source tree's package."""
    return subprocess.run([sys.executable, "-m", "tessera.convert", *map(str, args)], capture_output=True,
                          text=True, cwd=os.path.join(ROOT, "python"))


def read_csv_gz(path, dtype):
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2)


@pytest.fixture
def ogb_fixture(tmp_path):
    """The OGB fixture of tests/fixtures (50 nodes, duplicate edges and self loops among its 120) as the
    directory and its arrays: edges (2, E), x, y, splits."""
    out = tmp_path / "ogb"
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "fixtures", "make_ogb_fixture.py"), str(out)],
                   check=True, capture_output=True)
    edges = read_csv_gz(out / "raw" / "edge.csv.gz", np.int64).T
    x = read_csv_gz(out / "raw" / "node-feat.csv.gz", np.float32)
    y = read_csv_gz(out / "raw" / "node-label.csv.gz", np.int64)[:, 0]
    splits = {s: read_csv_gz(out / "split" / "random" / f"{s}.csv.gz", np.int64)[:, 0]
              for s in ("train", "valid", "test")}
    return out, dict(edges=edges, x=x, y=y, **splits)
