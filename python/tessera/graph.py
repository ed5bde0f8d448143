# SPDX-License-Identifier: BSD-3-Clause
"""A graph as arrays (the `Graph` the readers return) and `write_graph`, which writes a Tessera graph file:

    /                        attrs: format="tessera-graph", version=1 (2: multi-label or edge features;
                                    3: bf16 features), name, num_nodes, num_edges, num_features,
                                    num_classes, symmetric, source; version 2 adds task="multi-label",
                                    num_edge_features
    /graph/indptr, indices   int64: CSR by destination (row v lists the sources u of edges u -> v)
    /node/features           float32 [N, F], chunked by rows; version 3 may hold uint16 bf16 bits
                             instead (attribute dtype="bf16")
    /node/labels             int64 [N], -1 = unlabeled; multi-label: int8 [N, T] of 1, 0, -1 = unobserved
    /edge/features           float32 [E, Fe] in /graph/indices' order (optional)
    /split/train|valid|test  int64 node ids

Every argument is checked as `tessera info` checks the file, before anything is written (ValueError naming
the argument and the problem), and the file is written under the output policy of `tessera._output`: a
temporary beside the target (symbolic links followed), flushed and renamed when complete.
"""
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import scipy.sparse as sp

from ._output import atomic_output

SPLITS = ("train", "valid", "test")
# The graph reader's bounds (graph_file.cpp): sizes far past any real graph, inside every index type.
MAX_NODES, MAX_EDGES, MAX_FEATURES, MAX_CLASSES = 1 << 40, 1 << 48, 1 << 24, 1 << 24


@dataclass
class Graph:
    """A node-classification graph as arrays: edges u -> v as edge_index[0] = u, edge_index[1] = v (PyG's
    convention), features x [N, F], labels y [N] (-1: unlabeled) or, multi-label, [N, T]
    of 1, 0 and -1 (unobserved), and split node ids."""
    edge_index: np.ndarray
    x: np.ndarray
    y: np.ndarray
    splits: dict = field(default_factory=dict)
    name: str = "graph"
    source: str = "python"
    edge_attr: Optional[np.ndarray] = None  # [E, Fe] features of edge_index's edges
    link_splits: Optional[dict] = None       # write_graph's link_splits

    @property
    def num_nodes(self):
        """Rows of x."""
        return int(self.x.shape[0])

    def arrays(self):
        """The keyword arguments of write_graph for this graph."""
        return dict(edges=self.edge_index, x=self.x, y=self.y, name=self.name, source=self.source,
                    edge_attr=self.edge_attr, link_splits=self.link_splits,
                    **{s: self.splits.get(s) for s in SPLITS})


def _edge_index(edges, n):
    """(2, E) int64 sources and destinations of `edges`: a (2, E) array, or an N x N scipy matrix with an
    entry at (u, v) for each edge u -> v."""
    if sp.issparse(edges):
        if edges.shape != (n, n):
            raise ValueError(f"edges: a {edges.shape[0]} x {edges.shape[1]} matrix for {n} nodes (x has {n} rows)")
        coo = edges.tocoo()
        return np.vstack([coo.row, coo.col]).astype(np.int64)
    e = np.asarray(edges)
    if e.ndim != 2 or e.shape[0] != 2:
        raise ValueError(f"edges: expected a (2, E) array or a scipy sparse matrix, got shape {e.shape}")
    if e.size and not np.issubdtype(e.dtype, np.integer):
        raise ValueError(f"edges: node ids must be integers, not {e.dtype}")
    e = e.astype(np.int64)
    if e.size and (e.min() < 0 or e.max() >= n):
        bad = e[(e < 0) | (e >= n)][0]
        raise ValueError(f"edges: node id {bad} is outside [0, {n}) (x has {n} rows)")
    return e


def _split_ids(name, value, n):
    """Node ids of a split, given either as ids (1-D integers, each once) or as a boolean mask of length n:
    the dtype says which (an integer array is ids, never a mask)."""
    a = np.asarray(value)
    if a.dtype == bool:
        if a.shape != (n,):
            raise ValueError(f"{name}: a mask of {a.shape} for {n} nodes (a boolean mask has one entry per node)")
        return np.flatnonzero(a).astype(np.int64)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{name}: expected node ids (1-D integers) or a boolean mask, got {a.dtype} {a.shape}")
    a = a.astype(np.int64)
    if a.size and (a.min() < 0 or a.max() >= n):
        raise ValueError(f"{name}: node id {a[(a < 0) | (a >= n)][0]} is outside [0, {n})")
    if np.unique(a).size != a.size:
        raise ValueError(f"{name}: a node id appears twice")
    return a


def _disjoint(splits):
    """ValueError naming the first node that two splits share."""
    seen = {}
    for s, ids in splits.items():
        for other, before in seen.items():
            common = np.intersect1d(ids, before)
            if common.size:
                raise ValueError(f"{s}: node {int(common[0])} is also in {other} (splits must not overlap)")
        seen[s] = ids


def _csr_by_destination(e, n, symmetrize, edge_attr=None):
    """indptr, indices with row v listing the sources of v's in-edges, each row sorted, and the edges'
    features in that order; a symmetrized graph has every edge in both directions once (self loops once), as
    `tessera prep ogb --symmetrize`: a reverse edge carries its edge's features, and of an edge listed twice
    the first listing's are kept."""
    src, dst = e[0], e[1]
    edge_id = np.arange(src.size, dtype=np.int64)
    if symmetrize:
        loop = src == dst
        src, dst = np.concatenate([src, dst[~loop]]), np.concatenate([dst, src[~loop]])
        edge_id = np.concatenate([edge_id, edge_id[~loop]])
    order = np.lexsort((edge_id, src, dst))
    src, dst, edge_id = src[order], dst[order], edge_id[order]
    if symmetrize and src.size:
        keep = np.ones(src.size, dtype=bool)
        keep[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
        src, dst, edge_id = src[keep], dst[keep], edge_id[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src.astype(np.int64), (None if edge_attr is None else edge_attr[edge_id])


def _checked_edge_attr(edge_attr, edges):
    """float32 [E, Fe] features of the E edges as given, finite."""
    a = np.asarray(edge_attr)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] != edges or not 1 <= a.shape[1] <= MAX_FEATURES:
        raise ValueError(f"edge_attr: expected [{edges}, features] (one row per edge), got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise ValueError(f"edge_attr: features must be numbers, not {a.dtype}")
    a = a.astype(np.float32)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"edge_attr: edge {int(np.argwhere(~np.isfinite(a))[0][0])} holds a value that is not finite")
    return a


def _is_symmetric(indptr, indices, n):
    a = sp.csr_matrix((np.ones(indices.size, dtype=np.int8), indices, indptr), shape=(n, n))
    return (a != a.T).nnz == 0


def _checked_label_matrix(y, n):
    """A multi-label matrix [n, T] of 1, 0 and -1 (unobserved) as int8."""
    if y.shape[0] != n or y.shape[1] < 1 or y.shape[1] > MAX_CLASSES:
        raise ValueError(f"y: a multi-label matrix must be [{n}, tasks] (one row per row of x), got {y.shape}")
    if y.size and not (np.issubdtype(y.dtype, np.integer) or y.dtype == bool):
        raise ValueError(f"y: multi-label entries must be integers 1, 0 or -1 (unobserved), not {y.dtype}")
    y = y.astype(np.int64)
    bad = (y < -1) | (y > 1)
    if bad.any():
        row, task = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"y: row {row}, task {task} is {int(y[row, task])} (multi-label entries are 1, 0 or -1)")
    if not (y >= 0).any():
        raise ValueError("y: no entry is observed (every entry is -1): nothing to train or score")
    return y.astype(np.int8)


def _checked_features_labels(x, y):
    if sp.issparse(x):
        x = x.toarray()
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x: expected a 2-D [nodes, features] array, got shape {x.shape}")
    if not 1 <= x.shape[0] <= MAX_NODES:
        raise ValueError(f"x: {x.shape[0]} rows; a graph needs at least one node (at most 2^40)")
    if not 1 <= x.shape[1] <= MAX_FEATURES:
        raise ValueError(f"x: {x.shape[1]} features per node; a graph needs at least one (at most 2^24)")
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise ValueError(f"x: features must be numbers, not {x.dtype}")
    x = x.astype(np.float32, copy=False)
    if not np.all(np.isfinite(x)):
        row = int(np.argwhere(~np.isfinite(x))[0][0])
        raise ValueError(f"x: row {row} holds a value that is not finite (or too large for float32)")
    y = np.asarray(y)
    if y.ndim == 2:
        return x, _checked_label_matrix(y, x.shape[0])
    if y.shape != (x.shape[0],) or (y.size and not np.issubdtype(y.dtype, np.integer)):
        raise ValueError(f"y: expected {x.shape[0]} integer labels (one per row of x), got {y.dtype} {y.shape}")
    y = y.astype(np.int64)
    if y.size and y.min() < -1:
        raise ValueError(f"y: label {y.min()} (labels are classes 0..C-1, or -1 for unlabeled)")
    return x, y


def _classes(y, num_classes):
    """The file's num_classes: `num_classes` checked against the labels, or max(y) + 1."""
    top = int(y.max()) + 1 if y.size else 0
    if num_classes is None:
        classes = top
    else:
        if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
            raise ValueError(f"num_classes: expected an integer, got {num_classes!r}")
        classes = int(num_classes)
        if classes < top:
            raise ValueError(f"y: label {top - 1} is not below num_classes {classes}")
    if classes < 1:
        raise ValueError("y: no node has a label (every label is -1): nothing to train or score; give labels "
                         "(classes 0..C-1)")
    if classes > MAX_CLASSES:
        raise ValueError(f"num_classes: {classes} classes; at most 2^24")
    return classes


LINK_SPLITS = ("train", "valid", "test")
LINK_PARTS = ("edges", "negatives", "negative_targets")


def _link_pairs(where, value, n):
    """A (2, K) array of node pairs (PyG's edge_label_index), checked, as the file's [K, 2]."""
    a = np.asarray(value)
    if a.ndim != 2 or a.shape[0] != 2 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        hint = " (transpose an [E, 2] array such as OGB's split_edge)" if a.ndim == 2 and a.shape[1] == 2 else ""
        raise ValueError(f"{where}: expected a (2, E) integer array of node pairs, got {a.dtype} {a.shape}{hint}")
    return _link_ids(where, a.T, n)


def _link_ids(where, a, n):
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.size and (a.min() < 0 or a.max() >= n):
        bad = int(a[(a < 0) | (a >= n)][0])
        raise ValueError(f"{where}: node id {bad} outside [0, {n})")
    return a


def _checked_link_splits(link_splits, n):
    """{split: {part: array}} as the file stores it: edges and negatives [K, 2], negative_targets [E, M]."""
    out = {}
    for split, parts in link_splits.items():
        if split not in LINK_SPLITS:
            raise ValueError(f"link_splits: '{split}' is not a link split ({', '.join(LINK_SPLITS)})")
        unknown = [p for p in parts if p not in LINK_PARTS]
        if unknown or "edges" not in parts:
            raise ValueError(f"link_splits['{split}']: parts are edges (required), negatives and negative_targets, "
                             f"not {sorted(parts)}")
        where = f"link_splits['{split}']"
        stored = {p: _link_pairs(f"{where}['{p}']", parts[p], n) for p in ("edges", "negatives") if p in parts}
        if "negative_targets" in parts:
            t = np.asarray(parts["negative_targets"])
            if t.ndim != 2 or t.shape[0] != len(stored["edges"]) or t.shape[1] < 1 or \
                    (t.size and not np.issubdtype(t.dtype, np.integer)):
                raise ValueError(f"{where}['negative_targets']: expected an integer [{len(stored['edges'])}, M] "
                                 f"array (M >= 1 negative targets per positive pair), got {t.dtype} {t.shape}")
            stored["negative_targets"] = _link_ids(f"{where}['negative_targets']", t, n)
        out[split] = stored
    return out


def link_split_from_labels(edge_label_index, edge_label):
    """One split of write_graph's link_splits from PyG's RandomLinkSplit output: the pairs of
    edge_label_index (2, E) labeled 1 are the positive edges, those labeled 0 the shared negatives."""
    pairs, label = np.asarray(edge_label_index), np.asarray(edge_label).reshape(-1)
    if pairs.ndim != 2 or pairs.shape[0] != 2 or label.shape[0] != pairs.shape[1]:
        raise ValueError(f"edge_label_index {pairs.shape} and edge_label {label.shape}: expected (2, E) and (E,)")
    if not np.all((label == 0) | (label == 1)):
        raise ValueError("edge_label: expected 1 (positive) or 0 (negative) per pair")
    return {"edges": pairs[:, label == 1], "negatives": pairs[:, label == 0]}


def _pairs_of(keys, n):
    """(2, K) pairs of keys a * n + b."""
    return np.vstack([keys // n, keys % n]).astype(np.int64)


def _negative_pairs(rng, n, edge_keys, count, undirected):
    """`count` distinct pairs (a, b), a != b (a < b when undirected), none an edge key, drawn uniformly."""
    chosen = np.zeros(0, np.int64)
    possible = n * (n - 1) // (2 if undirected else 1) - len(edge_keys)
    if count > possible:
        raise ValueError(f"link split: {count} negative pairs wanted, but only {possible} node pairs are not edges")
    while len(chosen) < count:
        a, b = rng.integers(0, n, size=(2, 2 * (count - len(chosen)) + 16))
        if undirected:
            a, b = np.minimum(a, b), np.maximum(a, b)
        keys = (a * n + b)[a != b]
        fresh = keys[~np.isin(keys, edge_keys) & ~np.isin(keys, chosen)]
        _, first = np.unique(fresh, return_index=True)
        chosen = np.concatenate([chosen, fresh[np.sort(first)]])
    return chosen[:count]


def random_link_split(graph, valid=0.05, test=0.10, seed=0, undirected=True):
    """A random link split of `graph`, as PyG's RandomLinkSplit makes one: of its distinct node pairs (u, v)
    with u != v (unordered when `undirected`), a `valid` and a `test` share (rounded down) are held out,
    removed from the graph in both directions, and as many node pairs that are not edges are drawn as their
    negatives (uniformly, distinct, the two splits' disjoint). The remaining pairs are the training positives
    (split "train", each pair once). Returns the graph of the remaining edges (self loops kept) and the
    link_splits of write_graph. Depends on the seed only."""
    if not (0 <= valid < 1 and 0 <= test < 1 and valid + test < 1):
        raise ValueError(f"link split: valid {valid} and test {test} must be shares in [0, 1) summing below 1")
    n, (u, v) = graph.num_nodes, graph.edge_index
    loops = u == v
    pair = np.minimum(u, v) * n + np.maximum(u, v) if undirected else u * n + v
    keys = np.unique(pair[~loops])
    m = len(keys)
    num_valid, num_test = int(valid * m), int(test * m)
    if num_valid + num_test == 0:
        raise ValueError(f"link split: {m} node pairs; valid {valid} and test {test} hold none of them out")
    rng = np.random.default_rng(seed)
    order = keys[rng.permutation(m)]
    held_valid, held_test = order[m - num_valid - num_test:m - num_test], order[m - num_test:]
    keep = loops | ~np.isin(pair, order[m - num_valid - num_test:])
    negatives = _negative_pairs(rng, n, keys, num_valid + num_test, undirected)
    if graph.link_splits:
        raise ValueError("link split: the graph has link splits already")
    attr = None if graph.edge_attr is None else np.asarray(graph.edge_attr)[keep]
    remaining = Graph(graph.edge_index[:, keep], graph.x, graph.y, dict(graph.splits), graph.name, graph.source,
                      edge_attr=attr)
    links = {name: {"edges": _pairs_of(held, n), "negatives": _pairs_of(neg, n)}
             for name, held, neg in (("valid", held_valid, negatives[:num_valid]),
                                     ("test", held_test, negatives[num_valid:])) if len(held)}
    links["train"] = {"edges": _pairs_of(np.sort(order[:m - num_valid - num_test]), n)}
    return remaining, links


def bf16_bits(x):
    """The bf16 bits (uint16) of float32 values rounded to nearest, ties to even, as Tessera rounds them."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    """The float32 values bf16 bits stand for (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def write_graph(path, edges, x, y, train=None, valid=None, test=None, *, name="graph", symmetrize=False,
                num_classes=None, source="python", edge_attr=None, link_splits=None, feature_dtype="f32"):
    """Writes a Tessera graph file at `path`.

    edges: a (2, E) array of edges u -> v (edges[0] = sources, as PyG's edge_index) or an N x N scipy matrix
    with an entry at (u, v) per edge; x: [N, F] features (dense or scipy); y: [N] integer labels, -1 for
    unlabeled (at least one node labeled), or an [N, T] matrix of 1, 0 and -1 (unobserved) for a multi-label
    graph of T binary tasks, or None for a graph of link splits only (no node labels); edge_attr: [E, Fe]
    features of the edges as given (PyG's edge_attr); link_splits: {"train"|"valid"|"test": {"edges": (2, E)
    positive pairs, "negatives": (2, K) pairs every positive is ranked against, "negative_targets": [E, M]
    negative targets of each positive pair's source}} (edges required, the others optional;
    link_split_from_labels turns PyG's RandomLinkSplit output into one); train / valid / test: node ids (an integer array) or boolean masks
    of length N (a bool array), disjoint (None: no such split); symmetrize: add every edge's reverse (and drop
    duplicates), as most node-classification benchmarks are used; num_classes: default max(y) + 1;
    feature_dtype: "f32", or "bf16" to store the features in half the bytes, rounded to nearest even (schema
    version 3; Tessera reads them back as fp32). Every file it accepts passes `tessera info`. Returns a dict of
    the sizes written."""
    if feature_dtype not in ("f32", "fp32", "bf16"):
        raise ValueError(f"feature_dtype: '{feature_dtype}'; f32 or bf16")
    if y is None and not link_splits:
        raise ValueError("y: None (no node labels) is for a graph of link splits; give link_splits")
    x, y = _checked_features_labels(x, np.full(np.asarray(x).shape[0], -1) if y is None else y)
    unlabeled = bool(link_splits) and not np.any(y >= 0)
    n = x.shape[0]
    e = _edge_index(edges, n)
    links = _checked_link_splits(link_splits or {}, n)
    multi_label = y.ndim == 2
    if multi_label and num_classes is not None and num_classes != y.shape[1]:
        raise ValueError(f"num_classes: {num_classes}, but y has {y.shape[1]} task columns")
    classes = y.shape[1] if multi_label else 0 if unlabeled else _classes(y, num_classes)
    attr = None if edge_attr is None else _checked_edge_attr(edge_attr, e.shape[1])
    splits = {s: _split_ids(s, v, n) for s, v in zip(SPLITS, (train, valid, test)) if v is not None}
    _disjoint(splits)
    indptr, indices, attr = _csr_by_destination(e, n, symmetrize, attr)
    if indices.size > MAX_EDGES:
        raise ValueError(f"edges: {indices.size} edges; at most 2^48")
    symmetric = bool(symmetrize) or _is_symmetric(indptr, indices, n)
    import h5py  # here: a process that only reads arrays need not load HDF5
    with atomic_output(path, "the graph file") as temp:
        with h5py.File(temp, "w") as f:
            version = 3 if feature_dtype == "bf16" else 2 if multi_label or attr is not None or links else 1
            for key, value in (("format", "tessera-graph"), ("version", version), ("name", str(name)),
                               ("num_nodes", n), ("num_edges", int(indices.size)), ("num_features", int(x.shape[1])),
                               ("num_classes", classes), ("symmetric", int(symmetric)), ("source", str(source))):
                f.attrs[key] = np.int64(value) if isinstance(value, int) else value
            if multi_label:
                f.attrs["task"] = "multi-label"
            if attr is not None:
                f.attrs["num_edge_features"] = np.int64(attr.shape[1])
                f.create_dataset("edge/features", data=attr)
            f.create_dataset("graph/indptr", data=indptr)
            f.create_dataset("graph/indices", data=indices)
            rows = max(1, min(n, (1 << 20) // max(1, 4 * x.shape[1])))
            if feature_dtype == "bf16":
                f.create_dataset("node/features", data=bf16_bits(x), chunks=(rows, x.shape[1]))
                f["node/features"].attrs["dtype"] = "bf16"
            else:
                f.create_dataset("node/features", data=x, chunks=(rows, x.shape[1]))
            f.create_dataset("node/labels", data=y)
            for s, ids in splits.items():
                f.create_dataset(f"split/{s}", data=ids)
            for split, parts in links.items():
                for part, pairs in parts.items():
                    f.create_dataset(f"link/{split}/{part}", data=pairs)
    return dict(nodes=n, edges=int(indices.size), features=int(x.shape[1]), classes=classes,
                feature_dtype="bf16" if feature_dtype == "bf16" else "f32",
                multi_label=multi_label, edge_features=0 if attr is None else int(attr.shape[1]),
                symmetric=symmetric, splits={s: int(v.size) for s, v in splits.items()},
                link_splits={s: {p: [int(d) for d in a.shape] for p, a in parts.items()} for s, parts in links.items()})


def largest_connected_component(graph):
    """The subgraph on the largest weakly connected component, nodes renumbered in their order, splits kept
    on the nodes that remain (as the GNN-benchmark collection is usually used)."""
    n = graph.num_nodes
    e = graph.edge_index
    a = sp.coo_matrix((np.ones(e.shape[1]), (e[0], e[1])), shape=(n, n))
    _, component = sp.csgraph.connected_components(a, directed=True, connection="weak")
    keep = component == np.bincount(component).argmax()
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[keep] = np.arange(int(keep.sum()))
    inside = keep[e[0]] & keep[e[1]]
    splits = {s: new_id[ids][new_id[ids] >= 0] for s, ids in graph.splits.items()}
    if graph.link_splits:
        raise ValueError("largest connected component: the graph has link splits, which would need renumbering")
    attr = None if graph.edge_attr is None else np.asarray(graph.edge_attr)[inside]
    return Graph(new_id[e[:, inside]], graph.x[keep], graph.y[keep], splits, graph.name, graph.source,
                 edge_attr=attr)


def per_class_split(labels, train_per_class=20, valid_per_class=30, seed=0):
    """Random per-class split of the labeled nodes: `train_per_class` and `valid_per_class` of every class
    (fewer where a class has fewer nodes), the remaining labeled nodes test. Depends on the seed only."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError("per-class split: a multi-label graph has no class per node (keep the file's splits)")
    rng = np.random.default_rng(seed)
    train, valid, test = [], [], []
    for c in range(int(labels.max()) + 1 if labels.size else 0):
        nodes = rng.permutation(np.flatnonzero(labels == c))
        train.append(nodes[:train_per_class])
        valid.append(nodes[train_per_class:train_per_class + valid_per_class])
        test.append(nodes[train_per_class + valid_per_class:])
    join = lambda parts: np.sort(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, np.int64)
    return {"train": join(train), "valid": join(valid), "test": join(test)}
