# SPDX-License-Identifier: BSD-3-Clause
"""Tessera from Python: graphs from arrays and from the formats PyG and DGL download, written as Tessera graph
files (HDF5) that `tessera train`, `tessera predict` and the C++ library read.

    import tessera
    tessera.write_graph("graph.h5", edge_index, x, y, train=train_idx, valid=val_idx, test=test_idx)
    graph = tessera.read_planetoid("data/Cora/raw", "cora")   # a Graph: arrays, splits, name
    tessera.write_graph("cora.h5", **graph.arrays())

`python3 -m tessera.convert FORMAT IN OUT.h5` (or `tessera-convert`) wraps the readers.
"""
from .graph import Graph, write_graph, largest_connected_component, per_class_split
from .readers import (read_planetoid, read_gnn_benchmark, read_plain_npz, read_graphsaint, read_reddit,
                      READERS)

__version__ = "0.1.0"
__all__ = ["Graph", "write_graph", "largest_connected_component", "per_class_split", "read_planetoid",
           "read_gnn_benchmark", "read_plain_npz", "read_graphsaint", "read_reddit", "READERS"]
