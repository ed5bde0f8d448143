# SPDX-License-Identifier: BSD-3-Clause
"""write_graph: files `tessera info` accepts, identical to `tessera prep ogb`'s for the same data, and
refused inputs."""
import os
import subprocess

import h5py
import numpy as np
import pytest

import tessera
from conftest import convert, tessera_program


def same_file(a, b):
    with h5py.File(a) as f, h5py.File(b) as g:
        for key in ("graph/indptr", "graph/indices", "node/features", "node/labels", "split/train",
                    "split/valid", "split/test"):
            assert np.array_equal(f[key][:], g[key][:]), key
        for key in ("num_nodes", "num_edges", "num_features", "num_classes", "symmetric"):
            assert int(f.attrs[key]) == int(g.attrs[key]), key


@pytest.mark.parametrize("symmetrize", [False, True])
def test_equals_the_ogb_converter(tmp_path, program, ogb_fixture, symmetrize):
    raw, arrays = ogb_fixture
    flags = ["--symmetrize"] if symmetrize else []
    program("prep", "ogb", raw, "-o", tmp_path / "prep.h5", *flags)
    sizes = tessera.write_graph(str(tmp_path / "py.h5"), symmetrize=symmetrize, **arrays)
    same_file(tmp_path / "prep.h5", tmp_path / "py.h5")
    info = program("info", tmp_path / "py.h5").stdout
    assert "valid:     yes" in info and f"nodes:     {sizes['nodes']}" in info


def test_masks_scipy_and_training(tmp_path, program, ogb_fixture):
    import scipy.sparse as sp
    _, a = ogb_fixture
    n = a["x"].shape[0]
    adjacency = sp.coo_matrix((np.ones(a["edges"].shape[1]), (a["edges"][0], a["edges"][1])), shape=(n, n))
    masks = {s: np.isin(np.arange(n), a[s]) for s in ("train", "valid", "test")}
    tessera.write_graph(str(tmp_path / "m.h5"), adjacency.tocsr(), sp.csr_matrix(a["x"]), a["y"], **masks,
                        symmetrize=True, name="fixture")
    tessera.write_graph(str(tmp_path / "i.h5"), symmetrize=True, **a)
    same_file(tmp_path / "m.h5", tmp_path / "i.h5")
    out = program("train", "--data", tmp_path / "m.h5", "--epochs", 3).stdout
    assert "best valid" in out.splitlines()[-1]


@pytest.mark.parametrize("change, message", [
    (dict(edges=np.array([[0, 1], [1, 50]])), "edges: node id 50 is outside [0, 50)"),
    (dict(edges=np.zeros((3, 4), dtype=np.int64)), "edges: expected a (2, E) array"),
    (dict(y=np.arange(49)), "y: expected 50 integer labels"),
    (dict(y=np.full(50, -2)), "y: label -2"),
    (dict(x=np.full((50, 6), np.nan, dtype=np.float32)), "x: row 0 holds a value that is not finite"),
    (dict(train=np.array([3, 3])), "train: a node id appears twice"),
    (dict(valid=np.array([60])), "valid: node id 60 is outside [0, 50)"),
    (dict(test=np.ones(7, dtype=bool)), "test: a mask of (7,) for 50 nodes"),
])
def test_refused_inputs_write_nothing(tmp_path, ogb_fixture, change, message):
    _, a = ogb_fixture
    with pytest.raises(ValueError) as e:
        tessera.write_graph(str(tmp_path / "bad.h5"), **{**a, **change})
    assert message in str(e.value)
    assert list(tmp_path.glob("bad.h5*")) == []


def test_bf16_features_equal_prep_and_train_as_their_rounding(tmp_path, program, ogb_fixture):
    """feature_dtype="bf16": version 3, uint16 bits marked bf16, the same file `prep ogb --feature-dtype bf16`
    writes; training on it is training on the float32 file of the rounded values."""
    from tessera.graph import bf16_bits, from_bf16_bits
    raw, arrays = ogb_fixture
    program("prep", "ogb", raw, "-o", tmp_path / "prep.h5", "--feature-dtype", "bf16")
    sizes = tessera.write_graph(str(tmp_path / "half.h5"), feature_dtype="bf16", **arrays)
    assert sizes["feature_dtype"] == "bf16"
    same_file(tmp_path / "prep.h5", tmp_path / "half.h5")
    with h5py.File(tmp_path / "half.h5") as f:
        assert int(f.attrs["version"]) == 3 and f["node/features"].dtype == np.uint16
        assert f["node/features"].attrs["dtype"] in ("bf16", b"bf16")
        assert np.array_equal(f["node/features"][:], bf16_bits(arrays["x"]))
    rounded = dict(arrays, x=from_bf16_bits(bf16_bits(arrays["x"])))
    tessera.write_graph(str(tmp_path / "rounded.h5"), **rounded)
    assert "features:  " in program("info", tmp_path / "half.h5").stdout
    assert "(stored in bf16)" in program("info", tmp_path / "half.h5").stdout
    last = [program("train", "--data", tmp_path / f, "--epochs", 3).stdout.strip().splitlines()[-1]
            for f in ("half.h5", "rounded.h5")]
    assert last[0].split(" (mean")[0] == last[1].split(" (mean")[0]
    with pytest.raises(ValueError, match="feature_dtype"):
        tessera.write_graph(str(tmp_path / "x.h5"), feature_dtype="f16", **arrays)


def test_per_class_split_and_lcc():
    y = np.repeat(np.arange(3), 60)
    s = tessera.per_class_split(y, 20, 30, seed=4)
    assert [len(s[k]) for k in ("train", "valid", "test")] == [60, 90, 30]
    assert np.bincount(y[s["train"]]).tolist() == [20, 20, 20]
    assert np.array_equal(s["train"], tessera.per_class_split(y, 20, 30, seed=4)["train"])
    assert not np.array_equal(s["train"], tessera.per_class_split(y, 20, 30, seed=5)["train"])
    assert len(np.intersect1d(s["train"], s["valid"])) == 0
    # Two components: 0-1-2 and 3-4; the largest keeps nodes 0, 1, 2 renumbered, and its splits.
    g = tessera.Graph(np.array([[0, 1, 3], [1, 2, 4]]), np.eye(5, dtype=np.float32), np.arange(5),
                      {"train": np.array([0, 4]), "test": np.array([2, 3])})
    lcc = tessera.largest_connected_component(g)
    assert lcc.num_nodes == 3 and lcc.edge_index.tolist() == [[0, 1], [1, 2]]
    assert lcc.splits["train"].tolist() == [0] and lcc.splits["test"].tolist() == [2]


@pytest.mark.parametrize("symmetrize", [False, True])
def test_read_ogb_equals_the_ogb_converter(tmp_path, program, ogb_fixture, symmetrize):
    raw, _ = ogb_fixture
    program("prep", "ogb", raw, "-o", tmp_path / "prep.h5", *(["--symmetrize"] if symmetrize else []))
    graph = tessera.read_ogb(str(raw))
    assert graph.source == "ogb" and graph.num_nodes == 50
    tessera.write_graph(str(tmp_path / "py.h5"), symmetrize=symmetrize, **graph.arrays())
    same_file(tmp_path / "prep.h5", tmp_path / "py.h5")


def test_read_ogb_names_what_is_missing(tmp_path, ogb_fixture):
    raw, _ = ogb_fixture
    (raw / "raw" / "node-label.csv.gz").unlink()
    with pytest.raises(ValueError, match="node-label.csv.gz: no such file"):
        tessera.read_ogb(str(raw))


def write_csv_gz(path, rows):
    import gzip
    with gzip.open(path, "wt") as f:
        f.write("".join(",".join(map(str, r)) + "\n" for r in rows))


@pytest.mark.parametrize("damage, message", [
    (lambda d: write_csv_gz(d / "raw" / "edge.csv.gz", [(0, 1, 2)]), "edge.csv.gz: rows of 3 values, expected 2"),
    (lambda d: write_csv_gz(d / "raw" / "node-label.csv.gz", [(1,)] * 7), "7 labels for 50 nodes"),
    (lambda d: write_csv_gz(d / "raw" / "num-node-list.csv.gz", [(50,), (3,)]), "expected one graph, found 2"),
    (lambda d: (d / "split" / "other").mkdir(), "2 splits \\(other, random\\): choose one with split="),
    (lambda d: write_csv_gz(d / "raw" / "node-feat.csv.gz", [("x", "y")]), "node-feat.csv.gz: "),
])
def test_read_ogb_refusals(ogb_fixture, damage, message):
    raw, _ = ogb_fixture
    damage(raw)
    with pytest.raises(ValueError, match=message):
        tessera.read_ogb(str(raw))


def test_convert_ogb_exit_codes(tmp_path, ogb_fixture):
    raw, _ = ogb_fixture
    edges = raw / "raw" / "edge.csv.gz"
    before = edges.read_bytes()
    r = convert("ogb", raw, edges)  # the output names a file the reader reads, deep in the dataset's folder
    assert r.returncode == 1 and "the output names an input file" in r.stderr and edges.read_bytes() == before
    r = convert("ogb", tmp_path / "none", tmp_path / "o.h5")
    assert r.returncode == 1 and "num-node-list.csv.gz: no such file" in r.stderr
    assert convert("ogb", raw, tmp_path / "o.h5").returncode == 0 and (tmp_path / "o.h5").exists()


def test_multi_label_and_edge_features(tmp_path, program, ogb_fixture):
    """A label matrix and edge features make a version 2 file: each stored edge carries the features of the
    edge it came from (its reverse's, where symmetrizing added it); info and train read it."""
    _, a = ogb_fixture
    n, edges = a["x"].shape[0], a["edges"]
    rng = np.random.default_rng(4)
    y = rng.integers(-1, 2, size=(n, 3))
    attr = rng.normal(size=(edges.shape[1], 2)).astype(np.float32)
    sizes = tessera.write_graph(str(tmp_path / "ml.h5"), edges, a["x"], y, a["train"], a["valid"], a["test"],
                                symmetrize=True, edge_attr=attr)
    assert sizes["multi_label"] and sizes["edge_features"] == 2 and sizes["classes"] == 3
    given = {}
    for k, (u, v) in enumerate(edges.T):
        given.setdefault((int(u), int(v)), k)
        given.setdefault((int(v), int(u)), k)
    with h5py.File(tmp_path / "ml.h5") as f:
        assert int(f.attrs["version"]) == 2 and f.attrs["task"] == "multi-label"
        assert int(f.attrs["num_edge_features"]) == 2
        assert np.array_equal(f["node/labels"][:], y) and f["node/labels"].dtype == np.int8
        indptr, indices, stored = f["graph/indptr"][:], f["graph/indices"][:], f["edge/features"][:]
    for v in range(n):
        for k in range(indptr[v], indptr[v + 1]):
            assert np.array_equal(stored[k], attr[given[(int(indices[k]), v)]]), (indices[k], v)
    info = program("info", tmp_path / "ml.h5").stdout
    assert "tasks:     3, multi-label" in info and "edge features: 2 per edge" in info and "valid:     yes" in info
    out = program("train", "--data", tmp_path / "ml.h5", "--epochs", 3, "--metric", "ap").stdout
    assert "average_precision" in out and "best valid" in out.splitlines()[-1]


@pytest.mark.parametrize("change, message", [
    (dict(y=np.full((50, 2), 2)), "y: row 0, task 0 is 2 (multi-label entries are 1, 0 or -1)"),
    (dict(y=np.full((50, 2), -1)), "y: no entry is observed"),
    (dict(y=np.zeros((49, 2), dtype=int)), "y: a multi-label matrix must be [50, tasks]"),
    (dict(edge_attr=np.zeros((3, 2))), "edge_attr: expected ["),
])
def test_refused_multi_label_inputs(tmp_path, ogb_fixture, change, message):
    _, a = ogb_fixture
    with pytest.raises(ValueError) as e:
        tessera.write_graph(str(tmp_path / "bad.h5"), **{**a, **change})
    assert message in str(e.value)
    assert not (tmp_path / "bad.h5").exists()


def link_fixture(rng, n, edges):
    """A RandomLinkSplit-like split: held-out pairs of the graph's edges, equal counts of random negatives."""
    held = edges[:, rng.permutation(edges.shape[1])[:40]]
    negatives = rng.integers(0, n, size=(2, 40))
    label = np.r_[np.ones(20), np.zeros(20)]
    valid = tessera.link_split_from_labels(np.hstack([held[:, :20], negatives[:, :20]]), label)
    test = {"edges": held[:, 20:], "negative_targets": rng.integers(0, n, size=(20, 7))}
    return {"valid": valid, "test": test}


def test_link_splits(tmp_path, program, ogb_fixture):
    """Link splits make a version 2 file with /link/SPLIT/{edges,negatives,negative_targets} as [rows, 2] and
    [rows, M]; info lists them; a graph of link splits alone needs no node labels. The reader refuses a node id
    out of range, a version 1 file with /link and a split of another name, each in one line; prep reorder
    carries them."""
    _, a = ogb_fixture
    n, rng = a["x"].shape[0], np.random.default_rng(6)
    links = link_fixture(rng, n, a["edges"])
    sizes = tessera.write_graph(str(tmp_path / "l.h5"), a["edges"], a["x"], None, symmetrize=True,
                                link_splits=links)
    assert sizes["classes"] == 0 and sizes["link_splits"]["test"]["negative_targets"] == [20, 7]
    with h5py.File(tmp_path / "l.h5") as f:
        assert int(f.attrs["version"]) == 2 and int(f.attrs["num_classes"]) == 0
        assert np.array_equal(f["link/valid/edges"][:], links["valid"]["edges"].T)
        assert np.array_equal(f["link/valid/negatives"][:], links["valid"]["negatives"].T)
        assert np.array_equal(f["link/test/negative_targets"][:], links["test"]["negative_targets"])
        assert "negatives" not in f["link/test"]
    info = program("info", tmp_path / "l.h5").stdout
    assert "links:     valid 20 edges + 20 negatives, test 20 edges x 7 negatives each" in info, info
    assert "valid:     yes" in info
    for damage, message in (
            (lambda f: f["link/test/negative_targets"].__setitem__((3, 2), n), f"/link/test/negative_targets row 3: node id {n} outside"),
            (lambda f: f.attrs.__setitem__("version", np.int64(1)), "/link (link-prediction splits) in a version 1 file"),
            (lambda f: f.move("link/valid", "link/holdout"), "/link/holdout is not a link split (train, valid or test)"),
            (lambda f: f.create_dataset("link/train/edges", data=np.zeros((4, 3), np.int64)),
             "dataset /link/train/edges must be integers of shape [rows, 2], has shape [4, 3]")):
        bad = tmp_path / "bad.h5"
        bad.write_bytes((tmp_path / "l.h5").read_bytes())
        with h5py.File(bad, "r+") as f:
            damage(f)
        r = program("info", bad, ok=False)
        assert r.returncode != 0 and message in r.stderr, r.stderr
    # prep reorder carries them, renamed: through /node/original_id they are the input's pairs.
    program("prep", "reorder", tmp_path / "l.h5", "-o", tmp_path / "re.h5", "--order", "rcm")
    with h5py.File(tmp_path / "l.h5") as f, h5py.File(tmp_path / "re.h5") as g:
        original = g["node/original_id"][:]
        assert not np.array_equal(original, np.arange(n)) and int(g.attrs["version"]) == 2
        for name in ("link/valid/edges", "link/valid/negatives", "link/test/edges", "link/test/negative_targets"):
            assert np.array_equal(original[g[name][:]], f[name][:]), name
    assert "links:     valid 20 edges + 20 negatives" in program("info", tmp_path / "re.h5").stdout
    # On 8 ranks, a split of 3 pairs leaves most ranks' blocks empty: every rank still enters every check, and
    # a bad id in the last block is refused on all of them.
    mpiexec = os.environ.get("MPIEXEC")
    if mpiexec:
        few = {"valid": {"edges": links["valid"]["edges"][:, :3], "negatives": links["valid"]["negatives"][:, :2]}}
        tessera.write_graph(str(tmp_path / "few.h5"), a["edges"], a["x"], None, link_splits=few)
        run = lambda path: subprocess.run([mpiexec, "--oversubscribe", "-n", "8", tessera_program(), "info", str(path)],
                                          capture_output=True, text=True, timeout=120)
        r = run(tmp_path / "few.h5")
        assert r.returncode == 0 and "links:     valid 3 edges + 2 negatives" in r.stdout, r.stderr
        with h5py.File(tmp_path / "few.h5", "r+") as f:
            f["link/valid/edges"][2, 1] = -4
        r = run(tmp_path / "few.h5")
        assert r.returncode != 0 and "/link/valid/edges row 2: node id -4 outside [0, 50)" in r.stderr, r.stderr


@pytest.mark.parametrize("links, message", [
    ({"holdout": {"edges": np.zeros((2, 3), int)}}, "'holdout' is not a link split"),
    ({"valid": {"negatives": np.zeros((2, 3), int)}}, "parts are edges (required)"),
    ({"valid": {"edges": np.zeros((5, 2), int)}}, "(transpose an [E, 2] array"),
    ({"valid": {"edges": np.full((2, 3), 50)}}, "link_splits['valid']['edges']: node id 50 outside [0, 50)"),
    ({"test": {"edges": np.zeros((2, 3), int), "negative_targets": np.zeros((2, 4), int)}},
     "expected an integer [3, M] array"),
])
def test_refused_link_splits(tmp_path, ogb_fixture, links, message):
    _, a = ogb_fixture
    with pytest.raises(ValueError) as e:
        tessera.write_graph(str(tmp_path / "bad.h5"), **a, link_splits=links)
    assert message in str(e.value)
    assert not (tmp_path / "bad.h5").exists()


def test_random_link_split(tmp_path, program, ogb_fixture):
    """A random link split holds out its shares of the distinct undirected pairs (rounded down), removes them
    from the graph in both directions and keeps every other edge; its negatives are distinct non-edges, as many
    as the positives, the two splits' disjoint; the same seed gives the same split. convert --link-split writes
    it."""
    folder, a = ogb_fixture
    graph = tessera.Graph(a["edges"], a["x"], a["y"], {"train": a["train"]})
    canon = lambda e: set(map(tuple, np.sort(e, axis=0).T.tolist()))
    pairs = {p for p in canon(a["edges"]) if p[0] != p[1]}
    rest, links = tessera.random_link_split(graph, valid=0.1, test=0.2, seed=3)
    held = {s: canon(links[s]["edges"]) for s in ("valid", "test")}
    assert [len(held["valid"]), len(held["test"])] == [int(0.1 * len(pairs)), int(0.2 * len(pairs))]
    assert not held["valid"] & held["test"] and held["valid"] | held["test"] <= pairs
    assert not canon(rest.edge_index) & (held["valid"] | held["test"])
    assert canon(rest.edge_index) | held["valid"] | held["test"] == canon(a["edges"])
    train = canon(links["train"]["edges"])
    assert len(train) == links["train"]["edges"].shape[1] and train == canon(rest.edge_index) - {(u, u) for u in range(len(a["x"]))}
    negatives = {s: canon(links[s]["negatives"]) for s in ("valid", "test")}
    for s in ("valid", "test"):
        assert len(negatives[s]) == len(held[s]) == links[s]["negatives"].shape[1]
        assert all(u < v for u, v in negatives[s]) and not negatives[s] & canon(a["edges"])
    assert not negatives["valid"] & negatives["test"]
    again = tessera.random_link_split(graph, valid=0.1, test=0.2, seed=3)[1]
    assert all(np.array_equal(links[s][p], again[s][p]) for s in links for p in links[s])
    directed = tessera.random_link_split(graph, valid=0.1, test=0.0, seed=3, undirected=False)[1]
    assert set(directed) == {"valid", "train"}
    r = convert("ogb", folder, tmp_path / "l.h5", "--link-split", "0.1,0.2", "--seed", "3")
    assert r.returncode == 0 and "link valid:" in r.stdout, r.stderr
    with h5py.File(tmp_path / "l.h5") as f:
        assert np.array_equal(f["link/test/negatives"][:], links["test"]["negatives"].T)
    assert "links:     train" in program("info", tmp_path / "l.h5").stdout
    r = convert("ogb", folder, tmp_path / "bad.h5", "--link-split", "0.1")
    assert r.returncode == 1 and "--link-split: expected VALID,TEST shares" in r.stderr
    with pytest.raises(ValueError, match="must be shares in"):
        tessera.random_link_split(graph, valid=0.6, test=0.5)
