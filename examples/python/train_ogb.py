#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Tessera from Python, end to end: convert an OGB node-property dataset (its raw download layout) with the
package's reader, train a GCN on every rank of the job with a hook of our own, and write every node's embedding.

    mpiexec -n 4 python3 examples/python/train_ogb.py path/to/cora out/

Writes out/graph.h5 (the converted graph), out/embeddings.npy ([nodes, hidden], in the dataset's node order)
and prints the test accuracy at the best validation epoch.
"""
import os
import sys

import numpy as np

import tessera  # before h5py or anything that imports it: the package selects the MPI build of h5py
from mpi4py import MPI


class Progress:
    """Rank 0 prints every 25th epoch; the run stops once validation accuracy has not improved for 50 epochs."""

    def __init__(self, patience=50):
        self.best, self.since, self.patience = 0.0, 0, patience

    def __call__(self, record):
        if MPI.COMM_WORLD.rank == 0 and record["epoch"] % 25 == 0:
            print(f"epoch {record['epoch']:4d}  loss {record['loss']:.4f}  valid {record['valid_acc']:.4f}",
                  flush=True)
        if record["valid_acc"] > self.best:
            self.best, self.since = record["valid_acc"], 0
        else:
            self.since += 1
        return self.since < self.patience  # False stops every rank after this epoch


def main(dataset, out):
    comm = MPI.COMM_WORLD
    graph_file = os.path.join(out, "graph.h5")
    if comm.rank == 0:  # one rank converts; the others wait for the file
        os.makedirs(out, exist_ok=True)
        data = tessera.read_ogb(dataset)
        sizes = tessera.write_graph(graph_file, symmetrize=True, **data.arrays())
        print(f"converted {dataset}: {sizes['nodes']} nodes, {sizes['edges']} edges", flush=True)
    comm.barrier()

    # 3D grid: one rank, or 1x2x2 on four (tessera.train picks one by its performance model otherwise).
    grid = {1: None, 2: "1x1x2", 4: "1x2x2", 8: "2x2x2"}.get(comm.size)
    result = tessera.train({"data": graph_file, "grid": grid, "epochs": 200, "hidden": 64, "dropout": 0.5,
                            "weight_decay": 5e-4, "lr": 0.01, "seed": 1, "quiet": True}, hooks=[Progress()])

    # Each rank holds its block of nodes' embeddings; rank 0 gathers them in node order.
    blocks = comm.gather((result.node_begin, result.embeddings), root=0)
    if comm.rank == 0:
        embeddings = np.concatenate([e for _, e in sorted(blocks, key=lambda b: b[0])])
        np.save(os.path.join(out, "embeddings.npy"), embeddings)
        print(f"best valid {result.best_valid:.4f} at epoch {result.best_epoch}: "
              f"test accuracy {result.test_at_best:.4f}; embeddings {embeddings.shape} in {out}/embeddings.npy")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: train_ogb.py DATASET_DIR OUT_DIR")
    main(sys.argv[1], sys.argv[2])
