# SPDX-License-Identifier: BSD-3-Clause
"""Composing a run from the library's pieces: a graph on a process grid (from this rank's NumPy/SciPy arrays or
from a graph file), a Sequential model of the library's layers, a loss, a learning-rate schedule and hooks,
trained on the full graph.

    graph = tessera.graph_from_arrays(indptr, indices, x, y, masks, first_row=..., num_nodes=..., grid="1x2x2")
    model = tessera.Sequential([tessera.Dropout(0.5), tessera.SageConv(16, relu=True, dropout=0.5),
                                tessera.SageConv(graph.num_classes)], seed=3)
    result = tessera.fit(model, graph, epochs=200, lr=0.01, weight_decay=5e-4)
"""
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import numpy as np

from ._runtime import bindings
from .training import TrainResult, _hook_calls, _result


@dataclass(frozen=True)
class _Dense:
    """A layer to `width` columns; optional bias, then ReLU, then dropout (in one pass)."""
    width: int
    relu: bool = False
    dropout: float = 0.0
    bias: bool = True


class GcnConv(_Dense):
    """GCN aggregation (symmetric weights) then a dense layer to `width`; optional bias, ReLU and dropout."""
    kind = "gcn"


class SageConv(_Dense):
    """GraphSAGE-mean: [mean of in-neighbours, self] then a dense layer to `width`."""
    kind = "sage"


class Linear(_Dense):
    """A dense layer to `width` with no aggregation."""
    kind = "linear"


@dataclass(frozen=True)
class GatConv:
    """Graph attention (GAT; PyG's GATConv): `heads` heads of `width` features each, a node's scores
    LeakyReLU(`negative_slope`) of a_src . z_u + a_dst . z_v over its in-edges and its self loop, softmax per
    node; the heads concatenated (heads x width columns) or averaged (width); then bias, `activation` (None,
    "relu" or "elu") and dropout. `attention_dropout` drops attention coefficients on training passes (what
    PyG's GATConv calls `dropout`). Needs a `symmetric` graph, as GcnConv."""
    width: int
    heads: int = 1
    concat: bool = True
    negative_slope: float = 0.2
    attention_dropout: float = 0.0
    activation: Optional[str] = None
    dropout: float = 0.0
    bias: bool = True
    kind = "gat"


@dataclass(frozen=True)
class Dropout:
    """Dropout on training passes at `rate`."""
    rate: float
    kind = "dropout"


@dataclass(frozen=True)
class ReLU:
    """max(0, x)."""
    kind = "relu"


@dataclass(frozen=True)
class BatchNorm:
    """Batch normalization over the nodes of the pass; optional ReLU and dropout after it."""
    relu: bool = False
    dropout: float = 0.0
    kind = "batch_norm"


@dataclass(frozen=True)
class RmsNorm:
    """RMS normalization of each node's features; optional ReLU and dropout after it."""
    relu: bool = False
    dropout: float = 0.0
    kind = "rms_norm"


def _layer_spec(layer):
    width = getattr(layer, "width", 0)
    dropout = getattr(layer, "rate", getattr(layer, "dropout", 0.0))
    extra = {}
    if layer.kind == "gat":
        extra = {"heads": int(layer.heads), "concat": bool(layer.concat),
                 "negative_slope": float(layer.negative_slope),
                 "attention_dropout": float(layer.attention_dropout),
                 "activation": "none" if layer.activation is None else str(layer.activation)}
    return (layer.kind, int(width), bool(getattr(layer, "relu", False)), float(dropout),
            bool(getattr(layer, "bias", True)), extra)


class Sequential:
    """Layers applied in order; the last one's width is the number of classes. `seed` keys the weights'
    initialization and the dropout masks."""

    def __init__(self, layers: Sequence = (), seed: int = 0):
        self.layers = list(layers)
        self.seed = int(seed)

    def add(self, layer):
        """Appends a layer; returns the model."""
        self.layers.append(layer)
        return self


class LoadedGraph:
    """A graph loaded onto a process grid (every rank holds its blocks), from arrays or a file: what
    graph_from_arrays and load_graph return, and fit trains on. It lives until garbage-collected or released."""

    def __init__(self, handle):
        self._handle = handle

    num_nodes = property(lambda self: self._handle.num_nodes, doc="nodes of the whole graph")
    num_features = property(lambda self: self._handle.num_features, doc="feature columns")
    num_classes = property(lambda self: self._handle.num_classes, doc="label classes")
    grid = property(lambda self: self._handle.grid, doc="the process grid, XxYxZ")

    def release(self):
        """Frees the graph's memory now (collective) rather than when it is garbage-collected."""
        self._handle.release()


def _graph_options(normalization, normalize_features, permute, seed, layers):
    return {"normalization": normalization, "normalize_features": bool(normalize_features), "permute": permute,
            "seed": int(seed), "layers": int(layers)}


def _split_bits(masks: Dict[str, np.ndarray], rows: int):
    names = list(masks)
    if len(names) > 8:
        raise ValueError(f"at most 8 splits, not {len(names)}")
    bits = np.zeros(rows, dtype=np.uint8)
    for k, name in enumerate(names):
        mask = np.asarray(masks[name])
        if mask.dtype != np.bool_:  # an index array of this rank's rows
            index, mask = mask, np.zeros(rows, dtype=bool)
            mask[index] = True
        if mask.shape != (rows,):
            raise ValueError(f"split '{name}': {mask.shape[0]} entries for {rows} rows")
        bits |= mask.astype(np.uint8) << np.uint8(k)
    return bits, names


def graph_from_arrays(indptr, indices, features, labels, masks: Dict[str, np.ndarray], *, first_row: int,
                      num_nodes: int, num_classes: Optional[int] = None, grid: str = "", comm=None,
                      normalization: str = "symmetric", normalize_features: bool = False, permute: str = "double",
                      seed: int = 0, layers: int = 0, name: str = "arrays") -> LoadedGraph:
    """Collective: this rank's contiguous block of destination rows [first_row, first_row + rows) as CSR of
    in-neighbours (indptr, indices: source ids), features [rows, F], labels [rows] (-1: none) and named masks
    (bool per row, or row indices; "train" required, up to 8, the same names on every rank). A SciPy CSR matrix
    of the rows may stand for indptr with indices=None. num_classes defaults to the largest label + 1 over the
    ranks. grid: the 3D grid XxYxZ (required on more than one rank). The rows are checked collectively: a
    problem with any rank's arrays (their shapes, an id out of range, a non-finite feature) raises tessera.Error
    on every rank, naming `name`. normalization: symmetric (GCN), mean (GraphSAGE) or sum. layers: the deepest model
    it serves (0: any)."""
    core = bindings()
    from mpi4py import MPI
    comm_ = comm or MPI.COMM_WORLD

    def rows_here():
        nonlocal indptr, indices
        if indices is None and hasattr(indptr, "indptr"):
            indptr, indices = indptr.indptr, indptr.indices
        x = np.ascontiguousarray(features, dtype=np.float32)
        y = np.ascontiguousarray(labels, dtype=np.int64).reshape(-1)
        if x.ndim != 2:
            raise ValueError(f"features must be 2-D [rows, features], not {x.ndim}-D")
        splits, split_names = _split_bits(masks, len(y))
        return {"name": name, "num_nodes": int(num_nodes), "num_features": int(x.shape[1]),
                "first_row": int(first_row), "indptr": np.ascontiguousarray(indptr, dtype=np.int64),
                "indices": np.ascontiguousarray(indices, dtype=np.int64), "features": x, "labels": y,
                "splits": splits, "split_names": split_names}

    # A problem with one rank's arrays is every rank's error: the ranks agree before anything collective.
    try:
        rows, problem = rows_here(), None
    except (ValueError, TypeError) as e:
        rows, problem = None, str(e)
    problems = [(r, p) for r, p in enumerate(comm_.allgather(problem)) if p]
    if problems:
        raise core.Error(f"{name}: rank {problems[0][0]}: {problems[0][1]}")
    if num_classes is None:
        mine = int(rows["labels"].max()) + 1 if len(rows["labels"]) else 0
        num_classes = comm_.allreduce(mine, op=MPI.MAX)
    rows["num_classes"] = int(num_classes)
    options = _graph_options(normalization, normalize_features, permute, seed, layers)
    return LoadedGraph(core.build_graph(rows, grid, options, comm))


def load_graph(path, *, grid: str = "", comm=None, normalization: str = "symmetric",
               normalize_features: bool = False, permute: str = "double", seed: int = 0, layers: int = 0) -> LoadedGraph:
    """Collective: a Tessera graph file loaded onto the grid (XxYxZ; required on more than one rank). Options as
    graph_from_arrays."""
    options = _graph_options(normalization, normalize_features, permute, seed, layers)
    return LoadedGraph(bindings().load_graph(str(path), grid, options, comm))


def fit_defaults() -> dict:
    """fit()'s defaults, read off the C++ structs (TrainerOptions, AdamSettings, ScheduleSettings)."""
    return dict(bindings().fit_defaults())


def fit(model: Sequential, graph: LoadedGraph, *, epochs: int = None, lr: float = None, weight_decay: float = None,
        eval_every: int = None, clip_grad_norm: float = None, loss: str = "auto", metric: str = "auto",
        pos_weight=(), lr_schedule: str = None, lr_warmup: float = None, lr_step_every: float = None,
        lr_gamma: float = None, lr_min: float = None, hooks=(), keep_outputs: bool = True,
        quiet: bool = True) -> TrainResult:
    """Collective: trains `model` on the whole of `graph` with Adam (weight decay on weights, not biases).
    loss: auto (the graph's task's own), cross_entropy (scored by accuracy), binary_cross_entropy (one logit
    per node, scored by ROC-AUC) or multi_label_binary_cross_entropy (a multi-label graph: one logit per task,
    over its observed labels, each task's positives weighted by pos_weight: one number or one per task).
    metric: auto (the loss's own; multi-label: rocauc), or for a multi-label graph rocauc, ap, f1-micro or
    f1-macro; what the result's best_valid and history score.
    lr_schedule: constant, step (lr_gamma every lr_step_every epochs) or cosine (down to lr_min), after
    lr_warmup epochs of linear warm-up. An option left None takes the C++ library's default, which
    `fit_defaults()` lists (the same as `tessera train`'s). hooks and the result as in tessera.train."""
    on_epoch, on_step = _hook_calls(hooks)
    options = {"epochs": epochs, "lr": lr, "weight_decay": weight_decay, "eval_every": eval_every,
               "clip_grad_norm": clip_grad_norm, "loss": loss, "metric": metric,
               "pos_weight": [float(w) for w in np.atleast_1d(pos_weight)], "lr_schedule": lr_schedule,
               "lr_warmup": lr_warmup,
               "lr_step_every": lr_step_every, "lr_gamma": lr_gamma, "lr_min": lr_min,
               "keep_outputs": bool(keep_outputs), "quiet": bool(quiet)}
    layers = [_layer_spec(layer) for layer in model.layers]
    return _result(bindings().fit(graph._handle, layers, model.seed, options, on_epoch, on_step))
