#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""An independent reference for `tessera predict`: the model's forward in dense double precision with NumPy,
from the graph file and the checkpoint's arrays alone (GCN: D^-1/2 (A + I) D^-1/2 with D the in-degree + 1;
SAGE-mean: the in-neighbours' mean times the neighbour weight plus the node's own row times the root
weight; GAT: per head the softmax over a node's in-edges and its self loop of LeakyReLU(0.2) scores, hidden
heads concatenated with ELU, the last layer's averaged; a repeated edge counts as often as it is listed, as
PyG's message passing counts it; self loops of the file are left out, GCN's I and GAT's one self loop
standing for them), compared with a predictions file. A multi-label graph's predictions are its tasks whose
logit is above 0 and its probabilities each task's sigmoid.

reference_forward.py GRAPH.h5 CHECKPOINT.h5 PREDICTIONS.h5: exit 0 when the file's nodes, predictions,
probabilities and embeddings (where present) match the reference; else prints the first difference, exit 1.
Only models without a normalization layer (--norm none) are modelled.
"""
import re
import sys

import h5py
import numpy as np


def dense_operators(g):
    n = int(g.attrs["num_nodes"])
    indptr, indices = g["graph/indptr"][:], g["graph/indices"][:]
    a = np.zeros((n, n))
    for v in range(n):
        for u in indices[indptr[v]:indptr[v + 1]]:
            if u != v:
                a[v, u] += 1.0  # row v: the sources of edges u -> v
    degree = a.sum(axis=1)
    gcn = (a + np.eye(n)) / np.sqrt(np.outer(degree + 1, degree + 1))
    mean = a / np.maximum(degree, 1)[:, None]
    return gcn, mean


def attention(g, h, w, att_src, att_dst, concat):
    """One GAT layer's heads combined (before bias), every listed in-edge and one self loop per node."""
    n = int(g.attrs["num_nodes"])
    indptr, indices = g["graph/indptr"][:], g["graph/indices"][:]
    dst = np.repeat(np.arange(n), np.diff(indptr))
    keep = indices != dst
    dst = np.concatenate([dst[keep], np.arange(n)])
    src = np.concatenate([indices[keep], np.arange(n)])
    heads, width = att_src.shape
    z = (h @ w).reshape(n, heads, width)
    score = (z * att_src).sum(-1)[src] + (z * att_dst).sum(-1)[dst]
    score = np.where(score > 0, score, 0.2 * score)
    top = np.full((n, heads), -np.inf)
    np.maximum.at(top, dst, score)
    e = np.exp(score - top[dst])
    total = np.zeros((n, heads))
    np.add.at(total, dst, e)
    out = np.zeros((n, heads, width))
    np.add.at(out, dst, (e / total[dst])[:, :, None] * z[src])
    return out.reshape(n, heads * width) if concat else out.mean(axis=1)


def forward(g, ck, parameters):
    kind, layers = re.match(r"(gcn|sage|gat) (\d+)x", ck.attrs["model"].decode()
                            if isinstance(ck.attrs["model"], bytes) else ck.attrs["model"]).groups()
    layers = int(layers)
    prefix = "best/param/" if parameters == "best" else "param/"
    gcn, mean = dense_operators(g)
    h = g["node/features"][:].astype(np.float64)
    outputs = [h]
    for l in range(layers):
        p = lambda name: ck[prefix + f"layer{l}.{name}"][:].astype(np.float64)
        if kind == "gat":
            z = attention(g, h, p("weight"), p("att_src"), p("att_dst"), l + 1 < layers) + p("bias")[0]
            h = np.where(z > 0, z, np.expm1(np.minimum(z, 0))) if l + 1 < layers else z
            outputs.append(h)
            continue
        if kind == "gcn":
            z = gcn @ h @ p("weight")
        else:
            z = mean @ h @ p("neighbour_weight") + h @ p("root_weight")
        z = z + p("bias")[0]
        h = np.maximum(z, 0.0) if l + 1 < layers else z
        outputs.append(h)
    return outputs


def main(graph_path, checkpoint_path, predictions_path):
    with h5py.File(graph_path, "r") as g, h5py.File(checkpoint_path, "r") as ck, \
            h5py.File(predictions_path, "r") as out:
        attr = lambda k: out.attrs[k].decode() if isinstance(out.attrs[k], bytes) else out.attrs[k]
        outputs = forward(g, ck, attr("parameters"))
        logits, nodes = outputs[-1], out["nodes"][:]
        split = attr("nodes")
        want = np.arange(logits.shape[0]) if split == "all" else np.sort(g["split/" + split][:])
        if not np.array_equal(nodes, want):
            print(f"FAILED: /nodes is not the {split} nodes in order"); return 1
        z = logits[nodes]
        task = g.attrs.get("task", b"")
        multi_label = (task.decode() if isinstance(task, bytes) else task) == "multi-label"
        if multi_label:
            differs = out["predictions"][:] != (z > 0)
            close = np.abs(z) <= 1e-4 * (1 + np.abs(z).max())  # float32 may put a logit this near 0 either side
        else:
            top2 = np.sort(z, axis=1)[:, -2:] if z.shape[1] > 1 else np.concatenate([z, z - 1], axis=1)
            differs = out["predictions"][:] != z.argmax(axis=1)
            # float32 may order two logits within round-off of each other the other way
            close = top2[:, 1] - top2[:, 0] <= 1e-4 * (1 + np.abs(top2[:, 1]))
        if np.any(differs & ~close):
            print(f"FAILED: {int(differs.sum())} predictions differ from the reference"); return 1
        checks = []
        if "probabilities" in out and multi_label:
            checks.append(("probabilities", 1 / (1 + np.exp(-z))))
        elif "probabilities" in out:
            e = np.exp(z - z.max(axis=1, keepdims=True))
            checks.append(("probabilities", e / e.sum(axis=1, keepdims=True)))
        if "embeddings" in out:
            checks.append(("embeddings", outputs[int(attr("embeddings_layer"))][nodes]))
        for name, reference in checks:
            got = out[name][:].astype(np.float64)
            error = np.abs(got - reference).max() / max(1.0, np.abs(reference).max())
            if got.shape != reference.shape or error > 1e-4:
                print(f"FAILED: /{name} {got.shape} differs from the reference {reference.shape} by {error:.2e}")
                return 1
        print(f"ok: {len(nodes)} nodes ({split}), {attr('engine')} engine, {attr('parameters')} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
