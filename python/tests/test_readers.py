# SPDX-License-Identifier: BSD-3-Clause
"""Each reader on a fixture written in its format from known arrays: the arrays and splits come back, the
file tessera.convert writes is one `tessera info` accepts, and malformed inputs are refused by name."""
import json
import os
import pickle

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import tessera
from conftest import convert

N, F, C = 700, 8, 4


@pytest.fixture
def truth():
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, N, 3000), rng.integers(0, N, 3000)
    keep = src != dst
    x = rng.random((N, F)).astype(np.float32)
    return dict(edges=np.vstack([src[keep], dst[keep]]), x=x, y=rng.integers(0, C, N))


def check_file(path, program, nodes):
    info = program("info", path).stdout
    assert "valid:     yes" in info and f"nodes:     {nodes}" in info, info


def write_planetoid(d, t, allx_rows=600, train=30, missing=(610, 655)):
    """Planetoid's files: x/y the first `train` nodes, allx/ally the first `allx_rows`, tx/ty the test nodes
    in test.index's (shuffled) order; `missing` ids of the test range are left out, as CiteSeer does."""
    rng = np.random.default_rng(1)
    test = rng.permutation(np.setdiff1d(np.arange(allx_rows, N), missing))
    one_hot = np.eye(C)[t["y"]]
    adjacency = {}
    for u, v in t["edges"].T:
        adjacency.setdefault(int(u), []).append(int(v))
        adjacency.setdefault(int(v), []).append(int(u))
    parts = dict(x=sp.csr_matrix(t["x"][:train]), y=one_hot[:train], allx=sp.csr_matrix(t["x"][:allx_rows]),
                 ally=one_hot[:allx_rows], tx=sp.csr_matrix(t["x"][test]), ty=one_hot[test], graph=adjacency)
    for name, value in parts.items():
        with open(d / f"ind.toy.{name}", "wb") as f:
            pickle.dump(value, f, protocol=2)
    np.savetxt(d / "ind.toy.test.index", test, fmt="%d")
    return test


def test_planetoid(tmp_path, truth, program):
    test = write_planetoid(tmp_path, truth)
    g = tessera.read_planetoid(str(tmp_path), "toy")
    present = np.setdiff1d(np.arange(N), [610, 655])
    assert np.allclose(g.x[present], truth["x"][present]) and not g.x[[610, 655]].any()
    assert np.array_equal(g.y[present], truth["y"][present]) and (g.y[[610, 655]] == -1).all()
    assert g.splits["train"].tolist() == list(range(30)) and g.splits["valid"].tolist() == list(range(30, 530))
    assert np.array_equal(g.splits["test"], np.sort(test))
    r = convert("planetoid", tmp_path, tmp_path / "p.h5", "--name", "toy")
    assert r.returncode == 0, r.stderr
    check_file(tmp_path / "p.h5", program, N)
    out = program("train", "--data", tmp_path / "p.h5", "--epochs", 2).stdout
    assert "best valid" in out.splitlines()[-1]


def test_gnn_benchmark_both_layouts(tmp_path, truth, program):
    n = N
    adj = sp.csr_matrix((np.ones(truth["edges"].shape[1]), (truth["edges"][0], truth["edges"][1])), shape=(n, n))
    attr = sp.csr_matrix(truth["x"])
    np.savez(tmp_path / "a.npz", adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=adj.shape, attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr,
             attr_shape=attr.shape, labels=truth["y"])
    np.savez(tmp_path / "b.npz", adj_matrix=np.array(adj, dtype=object), node_attr=np.array(attr, dtype=object),
             node_label=truth["y"])
    a, b = tessera.read_gnn_benchmark(str(tmp_path / "a.npz")), tessera.read_gnn_benchmark(str(tmp_path / "b.npz"))
    for g in (a, b):
        assert np.allclose(g.x, truth["x"]) and np.array_equal(g.y, truth["y"])
        assert sorted(map(tuple, g.edge_index.T)) == sorted(zip(*adj.nonzero()))
        assert len(g.splits["train"]) == 20 * C and len(g.splits["valid"]) == 30 * C
    assert np.array_equal(a.splits["test"], b.splits["test"])
    r = convert("gnn-benchmark", tmp_path / "b.npz", tmp_path / "b.h5", "--lcc", "--seed", 2)
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "b.h5") as f:
        kept = int(f.attrs["num_nodes"])
    assert kept == tessera.largest_connected_component(b).num_nodes
    check_file(tmp_path / "b.h5", program, kept)


def test_plain_npz(tmp_path, truth, program):
    masks = np.zeros((3, N), dtype=bool)
    masks[1, :100] = True
    np.savez(tmp_path / "p.npz", node_features=truth["x"], node_labels=truth["y"], edges=truth["edges"].T,
             train_masks=masks, val_masks=np.roll(masks, 100, axis=1), test_masks=np.roll(masks, 200, axis=1))
    g = tessera.read_plain_npz(str(tmp_path / "p.npz"), split_index=1)
    assert g.splits["train"].tolist() == list(range(100)) and g.splits["test"].tolist() == list(range(200, 300))
    assert np.array_equal(g.edge_index, truth["edges"])
    assert convert("npz", tmp_path / "p.npz", tmp_path / "p.h5", "--split-index", 1).returncode == 0
    check_file(tmp_path / "p.h5", program, N)
    r = convert("npz", tmp_path / "p.npz", tmp_path / "q.h5", "--split-index", 3)
    assert r.returncode == 1 and "p.npz: split 3, but train_masks holds 3" in r.stderr
    assert not os.path.exists(tmp_path / "q.h5")
    r = convert("npz", tmp_path / "p.npz", tmp_path / "q.h5", "--binary-task")
    assert r.returncode == 1 and "--binary-task needs labels 0 and 1 (-1 unlabeled), not label 3" in r.stderr


def test_bf16_features(tmp_path, truth, program):
    """--feature-dtype bf16: the same graph with the features' bf16 bits (version 3), read back by the program
    as the rounded values; a dtype it does not know is refused before anything is written."""
    from tessera.graph import bf16_bits
    masks = np.zeros((1, N), dtype=bool)
    masks[0, :100] = True
    np.savez(tmp_path / "p.npz", node_features=truth["x"], node_labels=truth["y"], edges=truth["edges"].T,
             train_masks=masks, val_masks=np.roll(masks, 100, axis=1), test_masks=np.roll(masks, 200, axis=1))
    assert convert("npz", tmp_path / "p.npz", tmp_path / "f32.h5").returncode == 0
    r = convert("npz", tmp_path / "p.npz", tmp_path / "bf16.h5", "--feature-dtype", "bf16")
    assert r.returncode == 0 and f"{F} bf16 features" in r.stdout, r.stdout + r.stderr
    with h5py.File(tmp_path / "f32.h5", "r") as full, h5py.File(tmp_path / "bf16.h5", "r") as half:
        assert half.attrs["version"] == 3 and half["node/features"].dtype == np.uint16
        assert np.array_equal(half["node/features"][:], bf16_bits(full["node/features"][:]))
        assert np.array_equal(half["graph/indices"][:], full["graph/indices"][:])
    assert f"features:  {F} (stored in bf16)" in program("info", tmp_path / "bf16.h5").stdout
    r = convert("npz", tmp_path / "p.npz", tmp_path / "f16.h5", "--feature-dtype", "f16")
    assert r.returncode == 2 and "--feature-dtype: invalid choice: 'f16'" in r.stderr
    assert not os.path.exists(tmp_path / "f16.h5")


def test_binary_task_npz(tmp_path, truth, program):
    """A two-class graph in the heterophilous benchmarks' layout (Tolokers: ten fixed splits) as one binary
    task of a multi-label graph, trained and scored by ROC-AUC end to end."""
    masks, valid, test = (np.zeros((10, N), dtype=bool) for _ in range(3))
    for k in range(10):
        order = np.random.default_rng(k).permutation(N)
        masks[k, order[:300]], valid[k, order[300:500]], test[k, order[500:]] = True, True, True
    np.savez(tmp_path / "t.npz", node_features=truth["x"], node_labels=truth["y"] % 2, edges=truth["edges"].T,
             train_masks=masks, val_masks=valid, test_masks=test)
    r = convert("npz", tmp_path / "t.npz", tmp_path / "t.h5", "--split-index", 4, "--binary-task")
    assert r.returncode == 0 and "1 tasks (multi-label)" in r.stdout, r.stderr
    info = program("info", tmp_path / "t.h5").stdout
    assert f"tasks:     1, multi-label ({N} labeled nodes" in info
    out = program("train", "--data", tmp_path / "t.h5", "--epochs", 3, "--metric", "rocauc").stdout
    assert "roc_auc  train" in out and "best valid" in out.splitlines()[-1]


def write_graphsaint(d, t, multi_label=False):
    adj = sp.csr_matrix((np.ones(t["edges"].shape[1]), (t["edges"][0], t["edges"][1])), shape=(N, N))
    sp.save_npz(d / "adj_full.npz", adj)
    np.save(d / "feats.npy", t["x"])
    classes = {str(v): (np.eye(C, dtype=int)[c].tolist() if multi_label else int(c)) for v, c in enumerate(t["y"])}
    if multi_label:
        classes["5"] = [1] * C
    (d / "class_map.json").write_text(json.dumps(classes))
    (d / "role.json").write_text(json.dumps({"tr": list(range(0, 300)), "va": list(range(300, 400)),
                                             "te": list(range(400, N))}))


def test_graphsaint(tmp_path, truth, program):
    write_graphsaint(tmp_path, truth)
    g = tessera.read_graphsaint(str(tmp_path))
    assert np.array_equal(g.y, truth["y"]) and len(g.splits["test"]) == N - 400
    assert convert("graphsaint", tmp_path, tmp_path / "s.h5").returncode == 0
    check_file(tmp_path / "s.h5", program, N)
    # Lists of classes where a node has several (Yelp, PPI): a multi-label graph of one task per class.
    write_graphsaint(tmp_path, truth, multi_label=True)
    g = tessera.read_graphsaint(str(tmp_path))
    assert g.y.shape == (N, C) and g.y[5].tolist() == [1] * C
    assert np.array_equal(np.delete(g.y, 5, axis=0), np.delete(np.eye(C, dtype=np.int8)[truth["y"]], 5, axis=0))
    assert convert("graphsaint", tmp_path, tmp_path / "m.h5").returncode == 0
    info = program("info", tmp_path / "m.h5").stdout
    assert f"tasks:     {C}, multi-label ({N} labeled nodes" in info and "valid:     yes" in info
    r = convert("graphsaint", tmp_path, tmp_path / "split.h5", "--per-class-split")
    assert r.returncode == 1 and "per-class split: a multi-label graph has no class per node" in r.stderr
    (tmp_path / "class_map.json").write_text(json.dumps({"0": [1, 2, 0, 0], "1": [0, 1, 0, 0]}))
    r = convert("graphsaint", tmp_path, tmp_path / "bad.h5")
    assert r.returncode == 1 and "class_map.json: node 0 has entries other than 0 and 1" in r.stderr


def test_reddit(tmp_path, truth, program):
    types = np.repeat([1, 2, 3], [400, 100, 200])
    np.savez(tmp_path / "reddit_data.npz", feature=truth["x"], label=truth["y"], node_types=types,
             node_ids=np.arange(N))
    sp.save_npz(tmp_path / "reddit_graph.npz",
                sp.coo_matrix((np.ones(truth["edges"].shape[1]), tuple(truth["edges"])), shape=(N, N)))
    g = tessera.read_reddit(str(tmp_path))
    assert [len(g.splits[s]) for s in ("train", "valid", "test")] == [400, 100, 200]
    assert convert("reddit", tmp_path, tmp_path / "r.h5").returncode == 0
    check_file(tmp_path / "r.h5", program, N)


def test_convert_refusals(tmp_path, truth):
    r = convert("reddit", tmp_path, tmp_path / "r.h5")
    assert r.returncode == 1 and "reddit_data.npz: no such file" in r.stderr
    np.savez(tmp_path / "x.npz", something=np.zeros(3))
    r = convert("gnn-benchmark", tmp_path / "x.npz", tmp_path / "x.h5")
    assert r.returncode == 1 and "x.npz: not a GNN-benchmark file" in r.stderr
    r = convert("npz", tmp_path / "x.npz", tmp_path / "x.npz")
    assert r.returncode == 1 and "the output names an input" in r.stderr
    r = convert("planetoid", tmp_path, tmp_path / "p.h5")
    assert r.returncode == 1 and "planetoid needs --name" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npz"]


def make_ogbl(path, *args):
    import subprocess
    import sys
    fixture = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "make_ogbl_fixture.py")
    subprocess.run([sys.executable, fixture, str(path), *args], check=True, capture_output=True)


def test_ogbl_link_datasets(tmp_path, program):
    """OGB's link layout: the training graph with collab's weights and years as edge features, each split's
    .pt (PyTorch's zip format, and the format before it: the same arrays) as link splits, shared negatives
    (collab) and per-edge negative targets (citation2); info checks and lists them."""
    make_ogbl(tmp_path / "collab")
    make_ogbl(tmp_path / "legacy", "--legacy")
    make_ogbl(tmp_path / "citation2", "--layout", "citation2")
    g = tessera.read_ogbl(str(tmp_path / "collab"))
    assert g.y.min() == -1 and g.edge_attr.shape == (g.edge_index.shape[1], 2)
    old = tessera.read_ogbl(str(tmp_path / "legacy"))
    for split in ("train", "valid", "test"):
        for part, value in g.link_splits[split].items():
            assert np.array_equal(value, old.link_splits[split][part]), (split, part)
    assert np.array_equal(g.link_splits["train"]["edges"], g.edge_index)  # collab: the graph's own edges
    assert g.link_splits["valid"]["negatives"].shape == (2, 15) and "negatives" not in g.link_splits["train"]
    assert convert("ogbl", tmp_path / "collab", tmp_path / "c.h5").returncode == 0
    with h5py.File(tmp_path / "c.h5") as f:
        assert np.array_equal(f["link/valid/negatives"][:], g.link_splits["valid"]["negatives"].T)
        indptr, indices, attr = f["graph/indptr"][:], f["graph/indices"][:], f["edge/features"][:]
    given = {}
    for k, (u, v) in enumerate(g.edge_index.T):
        given[(int(u), int(v))] = given[(int(v), int(u))] = g.edge_attr[k]
    for v in range(len(indptr) - 1):
        for k in range(indptr[v], indptr[v + 1]):
            assert np.array_equal(attr[k], given[(int(indices[k]), v)])
    info = program("info", tmp_path / "c.h5").stdout
    assert "links:     train 90 edges, valid 12 edges + 15 negatives, test 12 edges + 15 negatives" in info, info
    assert "classes:   none (no node labels)" in info and "edge features: 2 per edge" in info
    c = tessera.read_ogbl(str(tmp_path / "citation2"))
    assert c.link_splits["test"]["negative_targets"].shape == (12, 6) and c.edge_attr is None
    assert convert("ogbl", tmp_path / "citation2", tmp_path / "t.h5").returncode == 0
    assert "valid 12 edges x 6 negatives each" in program("info", tmp_path / "t.h5").stdout


def test_ogbl_refusals(tmp_path):
    """A .pt whose pickle names anything but tensors is refused without running it; so are a dataset without
    node features and a truncated split file."""
    make_ogbl(tmp_path / "d")
    split = tmp_path / "d" / "split" / "time" / "valid.pt"

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo ran > " + str(tmp_path / "ran"),))
    import zipfile
    with zipfile.ZipFile(split, "w") as z:
        z.writestr("valid/data.pkl", pickle.dumps({"edge": Evil()}, protocol=2))
    with pytest.raises(ValueError, match="the pickle names .*system.*refused"):
        tessera.read_ogbl(str(tmp_path / "d"))
    assert not (tmp_path / "ran").exists()
    make_ogbl(tmp_path / "e", "--legacy")
    cut = tmp_path / "e" / "split" / "time" / "test.pt"
    cut.write_bytes(cut.read_bytes()[:-9])
    with pytest.raises(ValueError, match="test.pt: storage .* is cut short"):
        tessera.read_ogbl(str(tmp_path / "e"))
    os.remove(tmp_path / "e" / "raw" / "node-feat.csv.gz")
    with pytest.raises(ValueError, match="no node-feat.csv.gz"):
        tessera.read_ogbl(str(tmp_path / "e"))
    r = convert("ogbl", tmp_path / "e", tmp_path / "e.h5")
    assert r.returncode == 1 and "no node-feat.csv.gz" in r.stderr and not (tmp_path / "e.h5").exists()


def test_torch_files_equal_pytorchs_own(tmp_path):
    """Where PyTorch is installed: files it saved, in both formats, read back as its own tensors."""
    torch = pytest.importorskip("torch")
    from tessera._torch_file import load_torch_file
    e = torch.randint(0, 100, (7, 2))
    saved = {"edge": e, "weight": torch.rand(7), "view": torch.arange(24).reshape(4, 6)[:, 1:4], "tail": e[2:],
             "scalar": torch.tensor(3)}
    for zipped in (True, False):
        torch.save(saved, tmp_path / "t.pt", _use_new_zipfile_serialization=zipped)
        loaded = load_torch_file(str(tmp_path / "t.pt"))
        assert all(np.array_equal(loaded[k], v.numpy()) for k, v in saved.items()), zipped
