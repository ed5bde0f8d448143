# SPDX-License-Identifier: BSD-3-Clause
"""Tessera from Python.

Training (the C++ library, through its bindings; run under `mpiexec -n P python3 script.py`):

    import tessera
    result = tessera.train({"data": "cora.h5", "epochs": 200, "dropout": 0.5}, hooks=[print])
    graph = tessera.load_graph("cora.h5")          # or tessera.graph_from_arrays(...) per rank
    model = tessera.Sequential([tessera.GcnConv(16, relu=True, dropout=0.5), tessera.GcnConv(graph.num_classes)])
    result = tessera.fit(model, graph, epochs=200, weight_decay=5e-4)

Data (pure Python): graphs from arrays and from the formats PyG and DGL download, written as Tessera graph files:

    tessera.write_graph("graph.h5", edge_index, x, y, train=train_idx, valid=val_idx, test=test_idx)
    graph = tessera.read_planetoid("data/Cora/raw", "cora")   # a Graph: arrays, splits, name
    path = tessera.get_dataset("cora", root="data")           # downloaded and converted: data/cora.h5

`python3 -m tessera.convert FORMAT IN OUT.h5` (or `tessera-convert`) wraps the readers.
"""
from ._runtime import bindings_available, select_parallel_h5py

if bindings_available():
    select_parallel_h5py()  # before anything imports h5py: one (parallel) HDF5 in the process

from .graph import Graph, write_graph, largest_connected_component, link_split_from_labels, per_class_split, \
    random_link_split
from .readers import (read_ogb, read_ogbl, read_planetoid, read_gnn_benchmark, read_plain_npz, read_graphsaint, read_reddit,
                      READERS)
from .training import TrainResult, train
from .compose import (Sequential, GcnConv, SageConv, GatConv, Linear, Dropout, ReLU, BatchNorm, RmsNorm,
                      LoadedGraph, graph_from_arrays, load_graph, fit, fit_defaults)


def get_dataset(name, root=None, mirror=None, feature_dtype="f32"):
    """`tessera data get NAME` from Python: downloads (or finds) the benchmark dataset `name`, converts it and
    returns the graph file's path, ROOT/NAME.h5 (ROOT: `root`, else $TESSERA_DATA_ROOT, else ./data), or
    ROOT/NAME-bf16.h5 with `feature_dtype="bf16"` (the features stored as bf16 bits)."""
    from .data import get  # here: `python3 -m tessera.data` must not find the module imported already
    return get(name, root, mirror, feature_dtype)


def __getattr__(name):
    if name == "Error":  # the bindings' exception type, loaded on first use
        from ._runtime import bindings
        return bindings().Error
    raise AttributeError(f"module 'tessera' has no attribute '{name}'")


__version__ = "0.1.0"
__all__ = ["Graph", "write_graph", "link_split_from_labels", "random_link_split", "get_dataset", "largest_connected_component", "per_class_split", "read_ogb", "read_ogbl",
           "read_planetoid", "read_gnn_benchmark", "read_plain_npz", "read_graphsaint", "read_reddit", "READERS", "TrainResult",
           "train", "Sequential", "GcnConv", "SageConv", "GatConv", "Linear", "Dropout", "ReLU", "BatchNorm", "RmsNorm",
           "LoadedGraph", "graph_from_arrays", "load_graph", "fit", "fit_defaults", "Error"]
