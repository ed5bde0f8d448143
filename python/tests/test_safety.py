# SPDX-License-Identifier: BSD-3-Clause
"""Nothing lost from Python: write_graph writes through links and never over a FIFO or a device, checks what
`tessera info` checks (a property test over random arguments), and tessera.convert refuses every bad input
with one line and exit 1, running no code from a pickle."""
import gzip
import os
import pickle
import stat

import numpy as np
import pytest

import tessera
from conftest import convert


def info_ok(program, path):
    r = program("info", path, ok=False)
    return r.returncode == 0 and "valid:     yes" in r.stdout, r.stdout + r.stderr


def test_write_graph_writes_through_a_link(tmp_path, program, ogb_fixture):
    _, a = ogb_fixture
    (tmp_path / "store").mkdir()
    link = tmp_path / "link.h5"
    link.symlink_to(tmp_path / "store" / "g.h5")  # a link to a file that does not exist yet
    tessera.write_graph(str(link), **a)
    assert link.is_symlink() and (tmp_path / "store" / "g.h5").is_file()
    assert info_ok(program, link)[0]
    tessera.write_graph(str(link), symmetrize=True, **a)  # and again over the existing target
    assert link.is_symlink() and info_ok(program, tmp_path / "store" / "g.h5")[0]
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["g.h5"]  # no temporary left


def test_write_graph_refuses_a_fifo_and_a_device(tmp_path, ogb_fixture):
    _, a = ogb_fixture
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"pipe.h5: the graph file names a FIFO, not a regular file"):
        tessera.write_graph(str(fifo), **a)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    if os.geteuid() == 0:  # a character device of the test's own, never the machine's /dev nodes
        device = tmp_path / "null"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        with pytest.raises(ValueError, match=r"null: the graph file names a character device"):
            tessera.write_graph(str(device), **a)
        assert stat.S_ISCHR(os.stat(device).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp-" in p.name) == []


@pytest.mark.parametrize("change, message", [
    (dict(train=np.arange(10), valid=np.arange(5, 15)), "valid: node 5 is also in train"),
    (dict(x=np.zeros((0, 6), np.float32), y=np.zeros(0, np.int64), edges=np.zeros((2, 0), np.int64),
          train=None, valid=None, test=None), "x: 0 rows; a graph needs at least one node"),
    (dict(x=np.zeros((50, 0), np.float32)), "x: 0 features per node"),
    (dict(y=np.full(50, -1)), "y: no node has a label"),
    (dict(num_classes=10 ** 12), "num_classes: 1000000000000 classes; at most 2^24"),
    (dict(num_classes=2.5), "num_classes: expected an integer"),
    (dict(train=np.ones(50, dtype=np.int64)), "train: a node id appears twice"),
])
def test_write_graph_refuses_what_info_refuses(tmp_path, ogb_fixture, change, message):
    _, a = ogb_fixture
    with pytest.raises(ValueError) as e:
        tessera.write_graph(str(tmp_path / "bad.h5"), **{**a, **change})
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "bad.h5").exists()


def random_arguments(rng):
    """Arguments write_graph may accept or refuse: sizes down to zero, labels -1 only, overlapping or
    repeated split ids, masks of other lengths, num_classes below or far above the labels."""
    n, f = int(rng.integers(0, 12)), int(rng.integers(0, 4))
    e = int(rng.integers(0, 30))
    args = dict(edges=rng.integers(-1 if rng.random() < 0.1 else 0, max(n, 1) + (rng.random() < 0.1), (2, e)),
                x=rng.normal(size=(n, f)).astype(np.float32),
                y=rng.integers(-1, 4, n) if rng.random() < 0.8 else np.full(n, -1))
    for s in ("train", "valid", "test"):
        kind = rng.random()
        if kind < 0.3:
            args[s] = rng.permutation(n)[: int(rng.integers(0, n + 1))]
        elif kind < 0.45:
            args[s] = rng.integers(0, max(n, 1), int(rng.integers(0, 4)))  # may repeat or overlap
        elif kind < 0.7:
            args[s] = rng.random(n + int(rng.integers(-1, 2)) * (rng.random() < 0.2)) < 0.3
    if rng.random() < 0.3:
        args["num_classes"] = int(rng.choice([0, 1, 3, 4, 5, 2 ** 24, 2 ** 24 + 1]))
    args["symmetrize"] = bool(rng.random() < 0.5)
    return args


def test_every_file_write_graph_accepts_passes_info(tmp_path, program):
    rng = np.random.default_rng(11)
    accepted = refused = 0
    for k in range(60):
        path = tmp_path / f"g{k}.h5"
        try:
            tessera.write_graph(str(path), **random_arguments(rng))
        except ValueError as e:
            assert "\n" not in str(e) and not path.exists(), str(e)
            refused += 1
            continue
        ok, out = info_ok(program, path)
        assert ok, out
        accepted += 1
    assert accepted >= 10 and refused >= 10, (accepted, refused)


class Payload:
    """What a malicious pickle does when loaded with pickle.load: creates a file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def one_line_refusal(r, *expected):
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tessera-convert: error: "), r.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_convert_refuses_bad_pickles_without_running_them(tmp_path):
    marker = tmp_path / "ran"
    for part in ("x", "tx", "allx", "y", "ty", "ally"):
        with open(tmp_path / f"ind.toy.{part}", "wb") as f:
            pickle.dump(np.zeros((2, 2)), f, protocol=2)
    (tmp_path / "ind.toy.test.index").write_text("1\n")
    with open(tmp_path / "ind.toy.graph", "wb") as f:
        pickle.dump(Payload(marker), f, protocol=2)
    one_line_refusal(convert("planetoid", tmp_path, tmp_path / "o.h5", "--name", "toy"),
                     "ind.toy.graph: the pickle names posix.system", "refused")
    assert not marker.exists()
    with open(tmp_path / "ind.toy.graph", "wb") as f:
        pickle.dump([[0, 1], [1, 0]], f, protocol=2)  # a graph pickled as a list
    one_line_refusal(convert("planetoid", tmp_path, tmp_path / "o.h5", "--name", "toy"),
                     "ind.toy.graph: a list, not a dict of neighbour lists")
    (tmp_path / "ind.toy.graph").write_bytes(b"\x80\x02garbage")
    one_line_refusal(convert("planetoid", tmp_path, tmp_path / "o.h5", "--name", "toy"),
                     "ind.toy.graph: not a readable pickle")
    np.savez(tmp_path / "m.npz", adj_matrix=np.array(Payload(marker), dtype=object), node_attr=np.zeros(2),
             node_label=np.zeros(2))
    one_line_refusal(convert("gnn-benchmark", tmp_path / "m.npz", tmp_path / "o.h5"), "posix.system")
    assert not marker.exists() and not (tmp_path / "o.h5").exists()


def test_convert_refuses_bad_arrays(tmp_path):
    n = 20
    base = dict(node_features=np.ones((n, 3), np.float32), node_labels=np.arange(n) % 3,
                edges=np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1))
    cases = [
        (dict(train_masks=np.arange(5)), "train_masks: shape (5,) for 20 nodes"),
        (dict(train_masks=np.zeros(n + 5, bool)), "train_masks: shape (25,) for 20 nodes"),
        (dict(val_masks=np.full(n, 2)), "val_masks: int64 values other than 0 and 1"),
        (dict(node_labels=np.arange(n) * 0.5), "node 1 has label 0.5, not an integer class"),
        (dict(node_labels=np.where(np.arange(n) == 3, np.nan, 1.0)), "node 3 has label nan"),
    ]
    for change, message in cases:
        np.savez(tmp_path / "p.npz", **{**base, **change})
        one_line_refusal(convert("npz", tmp_path / "p.npz", tmp_path / "p.h5"), message)
    (tmp_path / "cut.npz").write_bytes(open(tmp_path / "p.npz", "rb").read()[:200])
    one_line_refusal(convert("npz", tmp_path / "cut.npz", tmp_path / "p.h5"), "cut.npz: not a readable npz")
    np.savez(tmp_path / "ok.npz", **{**base, "train_masks": np.arange(n) < 5})
    assert convert("npz", tmp_path / "ok.npz", tmp_path / "ok.h5").returncode == 0


def test_convert_refuses_fractional_ogb_labels(tmp_path, ogb_fixture):
    raw, _ = ogb_fixture
    labels = os.path.join(raw, "raw", "node-label.csv.gz")
    with gzip.open(labels, "rt") as f:
        lines = f.read().splitlines()
    lines[4] = "2.5"
    with gzip.open(labels, "wt") as f:
        f.write("\n".join(lines) + "\n")
    one_line_refusal(convert("ogb", raw, tmp_path / "o.h5"), "node-label.csv.gz: line 5: label 2.5 is not an integer")
