# SPDX-License-Identifier: BSD-3-Clause
"""Readers for the node-classification formats PyG and DGL download, each returning a `Graph`:

    read_planetoid(dir, name)       Planetoid's ind.NAME.{x,tx,allx,y,ty,ally,graph,test.index}, public split
    read_gnn_benchmark(file.npz)    the GNN-benchmark collection (adj_data/indices/indptr/shape, attr_*,
                                    labels), or its repack with pickled scipy matrices (adj_matrix,
                                    node_attr / attr_matrix, node_label / labels); per-class random split
    read_plain_npz(file.npz)        plain arrays: node_features, node_labels, edges [E, 2], *_masks
    read_graphsaint(dir)            GraphSAINT: adj_full.npz, feats.npy, class_map.json, role.json
    read_reddit(dir)                DGL's / PyG's Reddit: reddit_data.npz and reddit_graph.npz
    read_ogb(dir, split=None)       OGB's node-property raw layout: raw/{edge,node-feat,node-label,
                                    num-node-list}.csv.gz and split/KIND/{train,valid,test}.csv.gz
    read_ogbl(dir, split=None)      OGB's link-property layout: raw/ as above (no labels) and
                                    split/KIND/{train,valid,test}.pt edge splits (PyTorch files)

Each names the file and the problem in a ValueError when the input is not what its format says. The
pickle-based formats (Planetoid, GNN-benchmark's pickled matrices) are read by `tessera._unpickle`, which
builds only NumPy arrays, SciPy sparse matrices and plain containers: a file naming anything else is refused,
so converting an untrusted download cannot run code from it; PyTorch files (OGB's edge splits) likewise by
`tessera._torch_file`, which builds only arrays of their tensors.
"""
import json
import os

import numpy as np
import scipy.sparse as sp

from ._output import file_kind
from ._torch_file import load_torch_file
from ._unpickle import load_npz, load_pickle
from .graph import Graph, per_class_split


def _need(path):
    kind = file_kind(path)
    if kind is None:
        raise ValueError(f"{path}: no such file")
    if kind != "a regular file":  # checked before opening: a FIFO would block the reader
        raise ValueError(f"{path}: {kind}, not a regular file")
    return path


def _labels_from_one_hot(y, path):
    """Class ids from a [N] array of integral values (-1: unlabeled) or a one-hot [N, C] matrix (a row
    without a class: unlabeled); ValueError for fractional or non-finite labels."""
    y = np.asarray(y)
    if y.ndim == 1:
        if y.size and not np.issubdtype(y.dtype, np.integer):
            if not np.issubdtype(y.dtype, np.number) and y.dtype != bool:
                raise ValueError(f"{path}: labels of type {y.dtype}")
            bad = np.flatnonzero(~np.isfinite(y) | (y != np.round(y)))
            if bad.size:
                raise ValueError(f"{path}: node {int(bad[0])} has label {y[bad[0]]}, not an integer class")
        return y.astype(np.int64)
    if y.ndim != 2:
        raise ValueError(f"{path}: labels of shape {y.shape}")
    labels = y.argmax(axis=1).astype(np.int64)
    labels[y.sum(axis=1) == 0] = -1  # a row without a class: unlabeled
    return labels


def _mask(value, n, what):
    """A boolean mask of length n (or [K, n] of K masks) from a file: bools, or integers that are all 0 or 1
    with a mask's length. Index arrays are refused, not read as masks."""
    a = np.asarray(value)
    if a.shape[-1:] != (n,) or a.ndim > 2:
        raise ValueError(f"{what}: shape {a.shape} for {n} nodes; a mask has one entry per node (index arrays "
                         "are not masks)")
    if a.dtype != bool:
        if not np.issubdtype(a.dtype, np.integer) or (a.size and not np.isin(a, (0, 1)).all()):
            raise ValueError(f"{what}: {a.dtype} values other than 0 and 1; a mask holds booleans")
        a = a.astype(bool)
    return a


def read_planetoid(directory, name):
    """Planetoid (Yang et al. 2016, the Cora / CiteSeer / PubMed files PyG downloads) with its public split:
    the first len(y) nodes train, the next 500 validate, test.index test. Test nodes the files leave out
    (CiteSeer's isolated ones) get zero features and no label, as PyG does."""
    def load(part):
        path = _need(os.path.join(directory, f"ind.{name}.{part}"))
        if part == "test.index":
            return np.loadtxt(path, dtype=np.int64).reshape(-1)
        return load_pickle(path)
    x, tx, allx, y, ty, ally, graph = (load(p) for p in ("x", "tx", "allx", "y", "ty", "ally", "graph"))
    for part, value in (("x", x), ("tx", tx), ("allx", allx), ("y", y), ("ty", ty), ("ally", ally)):
        if not (sp.issparse(value) or isinstance(value, np.ndarray)) or len(value.shape) != 2:
            raise ValueError(f"{directory}/ind.{name}.{part}: a {type(value).__name__}, not a matrix")
    if not isinstance(graph, dict):
        raise ValueError(f"{directory}/ind.{name}.graph: a {type(graph).__name__}, not a dict of neighbour lists")
    try:
        test_index = load("test.index")
    except ValueError as e:
        raise ValueError(f"{directory}/ind.{name}.test.index: not a list of node ids ({e})") from None
    ordered = np.sort(test_index)
    full = np.arange(ordered.min(), ordered.max() + 1) if ordered.size else ordered
    tx_all = sp.lil_matrix((full.size, tx.shape[1]))
    tx_all[ordered - full.min(), :] = tx
    ty_all = np.zeros((full.size, ty.shape[1]))
    ty_all[ordered - full.min(), :] = ty
    features = sp.vstack([sp.csr_matrix(allx), sp.csr_matrix(tx_all)]).tolil()
    features[test_index, :] = features[ordered, :]
    labels = np.vstack([ally, ty_all])
    labels[test_index, :] = labels[ordered, :]
    n = features.shape[0]
    try:
        edges = [(int(u), int(v)) for u, nbrs in graph.items() for v in nbrs]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{directory}/ind.{name}.graph: not a dict of integer neighbour lists ({e})") from None
    e = np.array(edges, dtype=np.int64).T.reshape(2, -1)
    if e.size and (e.min() < 0 or e.max() >= n):
        raise ValueError(f"{directory}/ind.{name}.graph: node id {e.max()} outside the {n} nodes of the features")
    splits = {"train": np.arange(len(y)), "valid": np.arange(len(y), len(y) + 500), "test": ordered}
    return Graph(e, features.toarray().astype(np.float32),
                 _labels_from_one_hot(labels, f"{directory}/ind.{name}.ally"), splits, name, f"planetoid {name}")


def _npz(path):
    """np.load of an npz of plain arrays (no pickles), its failures one ValueError naming the file."""
    try:
        return np.load(_need(path), allow_pickle=False)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    except Exception as e:
        raise ValueError(f"{path}: not a readable npz archive ({type(e).__name__}: {e})") from None


def _npy(path):
    try:
        return np.load(_need(path), allow_pickle=False)
    except Exception as e:
        raise ValueError(f"{path}: not a readable npy array ({type(e).__name__}: {e})") from None


def _json(path):
    with open(_need(path)) as f:
        try:
            return json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None


def _load_sparse(path):
    try:
        return sp.load_npz(_need(path))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    except Exception as e:
        raise ValueError(f"{path}: not a scipy sparse npz ({type(e).__name__}: {e})") from None


def _sparse_from(data, prefix, path):
    keys = (f"{prefix}_data", f"{prefix}_indices", f"{prefix}_indptr", f"{prefix}_shape")
    if not all(k in data for k in keys):
        return None
    try:
        return sp.csr_matrix(tuple(data[k] for k in keys[:3]), shape=tuple(data[keys[3]]))
    except Exception as e:
        raise ValueError(f"{path}: {prefix}_* do not form a CSR matrix ({e})") from None


def _object(data, key):
    value = data[key]
    return value.item() if value.dtype == object and value.shape == () else value


def read_gnn_benchmark(path, train_per_class=20, valid_per_class=30, seed=0):
    """The GNN-benchmark collection (Shchur et al. 2018: Amazon, Coauthor, Cora-ML, ...), either layout, with
    a per-class random split of the labeled nodes (the files have none)."""
    data = load_npz(_need(path))
    adj = _sparse_from(data, "adj", path)
    if adj is None and "adj_matrix" in data:
        adj = sp.csr_matrix(_object(data, "adj_matrix"))
    attr = _sparse_from(data, "attr", path)
    for key in ("attr_matrix", "node_attr"):
        if attr is None and key in data:
            attr = _object(data, key)
    labels = next((_object(data, k) for k in ("labels", "node_label") if k in data), None)
    if adj is None or attr is None or labels is None:
        raise ValueError(f"{path}: not a GNN-benchmark file (keys {sorted(data.keys())}; expected adj_*, "
                         "attr_* or attr_matrix, labels, or adj_matrix, node_attr, node_label)")
    x = attr.toarray() if sp.issparse(attr) else np.asarray(attr)
    y = _labels_from_one_hot(labels.toarray() if sp.issparse(labels) else labels, path)
    if adj.shape != (x.shape[0], x.shape[0]) or y.shape[0] != x.shape[0]:
        raise ValueError(f"{path}: {adj.shape} adjacency, {x.shape[0]} feature rows, {y.shape[0]} labels")
    coo = adj.tocoo()
    name = os.path.splitext(os.path.basename(path))[0]
    return Graph(np.vstack([coo.row, coo.col]).astype(np.int64), x.astype(np.float32), y,
                 per_class_split(y, train_per_class, valid_per_class, seed), name, f"gnn-benchmark {name}")


def read_plain_npz(path, split_index=0):
    """Plain arrays (the heterophilous benchmarks' layout): node_features [N, F], node_labels [N], edges
    [E, 2] (source, destination), and train_masks / val_masks / test_masks, one mask or one per split
    (`split_index` picks the row)."""
    with _npz(path) as data:
        missing = [k for k in ("node_features", "node_labels", "edges") if k not in data]
        if missing:
            raise ValueError(f"{path}: no {', '.join(missing)} (keys {sorted(data.keys())})")
        x, y, edges = data["node_features"], data["node_labels"], data["edges"]
        splits = {}
        for ours, theirs in (("train", "train_masks"), ("valid", "val_masks"), ("test", "test_masks")):
            if theirs not in data:
                continue
            mask = _mask(data[theirs], np.shape(x)[0], f"{path}: {theirs}")
            if mask.ndim == 2:
                if not 0 <= split_index < mask.shape[0]:
                    raise ValueError(f"{path}: split {split_index}, but {theirs} holds {mask.shape[0]}")
                mask = mask[split_index]
            splits[ours] = np.flatnonzero(mask)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"{path}: edges of shape {edges.shape}, expected [E, 2]")
    name = os.path.splitext(os.path.basename(path))[0]
    return Graph(edges.T.astype(np.int64), np.asarray(x, dtype=np.float32), _labels_from_one_hot(y, path),
                 splits, name, f"npz {name}")


def read_graphsaint(directory):
    """GraphSAINT's layout (Zeng et al. 2020: Flickr, Reddit, Yelp, Amazon, PPI): adj_full.npz (scipy),
    feats.npy, class_map.json (node -> class, or node -> a list of 0/1 per class), role.json (tr / va / te
    node lists). A class map of lists where some node has other than one class (Yelp, PPI, Amazon) is
    multi-label: y is then [N, C] of 1 and 0, -1 for a node the map does not list."""
    adj = _load_sparse(os.path.join(directory, "adj_full.npz")).tocoo()
    x = _npy(os.path.join(directory, "feats.npy"))
    class_path = os.path.join(directory, "class_map.json")
    class_map, role = _json(class_path), _json(os.path.join(directory, "role.json"))
    n = x.shape[0]
    rows = {}
    for node, c in class_map.items():
        try:
            k = int(node)
            c = [int(v) for v in c] if isinstance(c, list) else int(c)
        except (TypeError, ValueError):
            raise ValueError(f"{class_path}: node {node!r} with class {c!r}: not integers") from None
        if not 0 <= k < n:
            raise ValueError(f"{class_path}: node {k} is outside the {n} rows of feats.npy")
        rows[k] = c
    y = _graphsaint_labels(rows, n, class_path)
    splits = {ours: np.asarray(role.get(theirs, []), dtype=np.int64)
              for ours, theirs in (("train", "tr"), ("valid", "va"), ("test", "te"))}
    name = os.path.basename(os.path.normpath(directory))
    return Graph(np.vstack([adj.row, adj.col]).astype(np.int64), x.astype(np.float32), y, splits, name,
                 f"graphsaint {name}")


def _graphsaint_labels(rows, n, class_path):
    """[N] classes (-1 unlabeled), or [N, C] of 1, 0 and -1 where the map's lists give some node other than one
    class."""
    lists = [c for c in rows.values() if isinstance(c, list)]
    if not lists:
        y = np.full(n, -1, dtype=np.int64)
        for k, c in rows.items():
            y[k] = c
        return y
    if len(lists) != len(rows) or len({len(c) for c in lists}) != 1:
        raise ValueError(f"{class_path}: a class map mixes classes and lists, or lists of different lengths")
    for k, c in rows.items():
        if any(v not in (0, 1) for v in c):
            raise ValueError(f"{class_path}: node {k} has entries other than 0 and 1 ({c})")
    if all(sum(c) == 1 for c in lists):
        y = np.full(n, -1, dtype=np.int64)
        for k, c in rows.items():
            y[k] = c.index(1)
        return y
    y = np.full((n, len(lists[0])), -1, dtype=np.int8)
    for k, c in rows.items():
        y[k] = c
    return y


def read_reddit(directory):
    """Reddit as DGL and PyG download it (Hamilton et al. 2017): reddit_data.npz (feature, label, node_types:
    1 train, 2 validation, 3 test) and reddit_graph.npz (the adjacency, scipy)."""
    data_path = _need(os.path.join(directory, "reddit_data.npz"))
    with _npz(data_path) as data:
        missing = [k for k in ("feature", "label", "node_types") if k not in data]
        if missing:
            raise ValueError(f"{data_path}: no {', '.join(missing)} (keys {sorted(data.keys())})")
        x, y, types = data["feature"], data["label"], data["node_types"]
    adj = _load_sparse(os.path.join(directory, "reddit_graph.npz")).tocoo()
    splits = {s: np.flatnonzero(types == t) for s, t in (("train", 1), ("valid", 2), ("test", 3))}
    return Graph(np.vstack([adj.row, adj.col]).astype(np.int64), x.astype(np.float32),
                 np.asarray(y, dtype=np.int64), splits, "reddit", "reddit (dgl/pyg)")


# The formats tessera.convert knows, by name.
def _csv_gz(path, dtype):
    import gzip
    with gzip.open(_need(path), "rt") as f:
        try:
            return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None


def _ogb_graph(directory):
    """OGB's raw/ folder of one graph: its path, the node count (num-node-list) and the edges [E, 2]."""
    raw = os.path.join(directory, "raw")
    nodes = _csv_gz(os.path.join(raw, "num-node-list.csv.gz"), np.int64).reshape(-1)
    if nodes.size != 1:
        raise ValueError(f"{raw}/num-node-list.csv.gz: expected one graph, found {nodes.size}")
    edges = _csv_gz(os.path.join(raw, "edge.csv.gz"), np.int64)
    if edges.size and edges.shape[1] != 2:
        raise ValueError(f"{raw}/edge.csv.gz: rows of {edges.shape[1]} values, expected 2")
    return raw, int(nodes[0]), edges


def read_ogb(directory, split=None):
    """An OGB node-property dataset as OGB downloads it (ogbn-arxiv, -products, Cora in that layout): one graph,
    edges u -> v as rows "u,v" of raw/edge.csv.gz, raw/node-feat.csv.gz, raw/node-label.csv.gz (one label per
    node; nan or a missing value: unlabeled), and split/KIND/{train,valid,test}.csv.gz (node ids). `split`
    names KIND where there are several. The graph is as the files give it; write_graph(symmetrize=True) adds
    reverse edges as `tessera prep ogb --symmetrize` does."""
    raw, n, edges = _ogb_graph(directory)
    x = _csv_gz(os.path.join(raw, "node-feat.csv.gz"), np.float32)
    raw_y = _csv_gz(os.path.join(raw, "node-label.csv.gz"), np.float64).reshape(-1)
    if x.shape[0] != n or raw_y.shape[0] != n:
        raise ValueError(f"{raw}: {x.shape[0]} feature rows and {raw_y.shape[0]} labels for {n} nodes")
    bad = np.flatnonzero(~np.isnan(raw_y) & (~np.isfinite(raw_y) | (raw_y != np.round(raw_y))))
    if bad.size:
        raise ValueError(f"{raw}/node-label.csv.gz: line {int(bad[0]) + 1}: label {raw_y[bad[0]]} is not an "
                         "integer class")
    y = np.where(np.isnan(raw_y), -1, raw_y).astype(np.int64)
    split = _split_kind(directory, split)
    splits = {s: _csv_gz(os.path.join(directory, "split", split, f"{s}.csv.gz"), np.int64).reshape(-1)
              for s in ("train", "valid", "test")}
    return Graph(edge_index=edges.T.copy() if edges.size else np.zeros((2, 0), np.int64), x=x, y=y,
                 splits=splits, name=os.path.basename(os.path.normpath(directory)), source="ogb")


def _split_kind(directory, split):
    kinds = sorted(os.listdir(os.path.join(directory, "split"))) if os.path.isdir(os.path.join(directory, "split")) else []
    if split is None:
        if len(kinds) != 1:
            raise ValueError(f"{directory}/split: {len(kinds)} splits ({', '.join(kinds)}): choose one with split=")
        split = kinds[0]
    return split


def _ogbl_split(d, path):
    """One split of an OGB link dataset (the dict its .pt holds) as write_graph's link split: its positive
    pairs ('edge' [E, 2], or 'source_node' and 'target_node' [E]), shared negatives ('edge_neg' [K, 2]) and
    per-edge negative targets ('target_node_neg' [E, M])."""
    if not isinstance(d, dict):
        raise ValueError(f"{path}: a {type(d).__name__}, not the dict of an OGB edge split")
    pairs = lambda key: np.asarray(d[key], dtype=np.int64).reshape(-1, 2).T
    if "edge" in d:
        out = {"edges": pairs("edge")}
    elif "source_node" in d and "target_node" in d:
        out = {"edges": np.vstack([np.asarray(d["source_node"]).reshape(-1), np.asarray(d["target_node"]).reshape(-1)])}
    else:
        raise ValueError(f"{path}: no 'edge' or 'source_node'/'target_node' (keys {sorted(d)})")
    if "edge_neg" in d:
        out["negatives"] = pairs("edge_neg")
    if "target_node_neg" in d:
        out["negative_targets"] = np.asarray(d["target_node_neg"], dtype=np.int64)
    return out


def _ogbl_splits(folder):
    """The three splits of split/KIND: train.pt, valid.pt and test.pt, or one split_dict.pt of all three."""
    combined = os.path.join(folder, "split_dict.pt")
    if not os.path.isfile(combined):
        return {s: _ogbl_split(load_torch_file(_need(os.path.join(folder, f"{s}.pt"))), os.path.join(folder, f"{s}.pt"))
                for s in ("train", "valid", "test")}
    d = load_torch_file(combined)
    if not isinstance(d, dict) or any(s not in d for s in ("train", "valid", "test")):
        raise ValueError(f"{combined}: not a dict of train, valid and test splits")
    return {s: _ogbl_split(d[s], f"{combined}: {s}") for s in ("train", "valid", "test")}


def read_ogbl(directory, split=None):
    """An OGB link-property dataset as OGB downloads it (ogbl-collab, -ppa, -citation2): the training graph,
    edges u -> v as rows "u,v" of raw/edge.csv.gz, raw/node-feat.csv.gz, collab's raw/edge_weight.csv.gz and
    raw/edge_year.csv.gz as edge features [weight, year], and split/KIND/{train,valid,test}.pt (or one
    split_dict.pt; PyTorch files, read without PyTorch) as link splits: positive pairs, shared negatives
    (edge_neg) and per-edge negative targets (target_node_neg). No node labels. `split` names KIND where
    there are several."""
    raw, n, edges = _ogb_graph(directory)
    if not os.path.exists(os.path.join(raw, "node-feat.csv.gz")):
        raise ValueError(f"{raw}: no node-feat.csv.gz (ogbl-ddi's baselines learn an embedding per node; "
                         "Tessera's models read node features)")
    x = _csv_gz(os.path.join(raw, "node-feat.csv.gz"), np.float32)
    if x.shape[0] != n:
        raise ValueError(f"{raw}/node-feat.csv.gz: {x.shape[0]} rows for {n} nodes")
    columns = [_csv_gz(os.path.join(raw, f), np.float32).reshape(-1) for f in ("edge_weight.csv.gz", "edge_year.csv.gz")
               if os.path.exists(os.path.join(raw, f))]
    if any(c.shape[0] != edges.shape[0] for c in columns):
        raise ValueError(f"{raw}: edge weights or years of another length than edge.csv.gz's {edges.shape[0]} rows")
    folder = os.path.join(directory, "split", _split_kind(directory, split))
    links = _ogbl_splits(folder)
    return Graph(edge_index=edges.T.copy() if edges.size else np.zeros((2, 0), np.int64), x=x,
                 y=np.full(n, -1, np.int64), name=os.path.basename(os.path.normpath(directory)), source="ogb",
                 edge_attr=np.stack(columns, axis=1) if columns else None, link_splits=links)


READERS = {"ogb": read_ogb, "ogbl": read_ogbl, "planetoid": read_planetoid, "gnn-benchmark": read_gnn_benchmark, "npz": read_plain_npz,
           "graphsaint": read_graphsaint, "reddit": read_reddit}
