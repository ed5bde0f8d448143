#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Baseline (not a test): full-graph GAT training with PyTorch on the CPU, written as PyG's GATConv computes
it (Debian's python3-torch has no PyG): z = x W per head, a node's source and destination terms, the edge
scores LeakyReLU(0.2) over every in-edge and the self loop, a softmax per destination by scatter max and
scatter sum (index ops), the attention-weighted sum by index_add_; hidden layers' heads concatenated with ELU
between, the last layer's averaged. Reads a Tessera graph file (/graph/indptr, /graph/indices, /node/features,
/node/labels, /split/train).

  torch_gat.py --h5 graph.h5 [--layers 2 --hidden 8 --heads 8 --output-heads 1 --epochs 10 --threads 2]
               [--device cpu|cuda] [--impl index|pyg]

--device cuda runs the same model on the GPU (each epoch timed after a synchronize). --impl pyg uses PyG's
own GATConv (torch_geometric, where it is installed) instead of the index ops, on the same edges.

Prints one line: nodes N edges E epoch_median_s T final_loss L
"""
import argparse
import time

import h5py
import numpy as np
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--h5", required=True)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--hidden", type=int, default=8)
ap.add_argument("--heads", type=int, default=8)
ap.add_argument("--output-heads", type=int, default=1)
ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
ap.add_argument("--impl", choices=["index", "pyg"], default="index")
a = ap.parse_args()
dev = torch.device(a.device)
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)

with h5py.File(a.h5, "r") as f:
    indptr = f["graph/indptr"][:]
    indices = f["graph/indices"][:]
    x = torch.from_numpy(f["node/features"][:].astype(np.float32)).to(dev)
    y = torch.from_numpy(f["node/labels"][:].astype(np.int64)).to(dev)
    train = torch.from_numpy(f["split/train"][:].astype(np.int64)).to(dev)
n = len(indptr) - 1
dst = np.repeat(np.arange(n), np.diff(indptr))
keep = indices != dst  # self loops added once below, as PyG's add_self_loops
dst = torch.from_numpy(np.concatenate([dst[keep], np.arange(n)]).astype(np.int64)).to(dev)
src = torch.from_numpy(np.concatenate([indices[keep], np.arange(n)]).astype(np.int64)).to(dev)
classes = int(y.max()) + 1


class Gat(torch.nn.Module):
    def __init__(self, fan_in, width, heads, concat):
        super().__init__()
        self.heads, self.width, self.concat = heads, width, concat
        self.lin = torch.nn.Linear(fan_in, heads * width, bias=False)
        self.att_src = torch.nn.Parameter(torch.empty(heads, width))
        self.att_dst = torch.nn.Parameter(torch.empty(heads, width))
        self.bias = torch.nn.Parameter(torch.zeros(heads * width if concat else width))
        torch.nn.init.xavier_uniform_(self.att_src)
        torch.nn.init.xavier_uniform_(self.att_dst)

    def forward(self, h):
        z = self.lin(h).view(-1, self.heads, self.width)
        score = torch.nn.functional.leaky_relu((z * self.att_src).sum(-1)[src] + (z * self.att_dst).sum(-1)[dst], 0.2)
        top = torch.full((n, self.heads), -float("inf"), device=dev).scatter_reduce(0, dst.unsqueeze(1).expand_as(score), score,
                                                                          "amax", include_self=True)
        e = torch.exp(score - top[dst])
        alpha = e / torch.zeros(n, self.heads, device=dev).index_add_(0, dst, e)[dst]
        out = torch.zeros(n, self.heads, self.width, device=dev).index_add_(0, dst, alpha.unsqueeze(-1) * z[src])
        out = out.reshape(n, -1) if self.concat else out.mean(1)
        return out + self.bias


class PygGat(torch.nn.Module):
    """PyG's GATConv on the same edges (it adds the self loops itself)."""

    def __init__(self, fan_in, width, heads, concat):
        super().__init__()
        from torch_geometric.nn import GATConv
        self.conv = GATConv(fan_in, width, heads=heads, concat=concat, negative_slope=0.2, dropout=0.0)

    def forward(self, h):
        return self.conv(h, edge_index)


conv = Gat
if a.impl == "pyg":
    conv = PygGat
    edge_index = torch.stack([src[:-n], dst[:-n]])
dims = [x.shape[1]] + [a.hidden * a.heads] * (a.layers - 1)
layers = torch.nn.ModuleList(
    [conv(dims[l], a.hidden, a.heads, True) for l in range(a.layers - 1)] + [conv(dims[-1], classes, a.output_heads, False)]).to(dev)
opt = torch.optim.Adam(layers.parameters(), lr=0.005)
times = []
for epoch in range(a.epochs):
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    opt.zero_grad()
    h = x
    for l, layer in enumerate(layers):
        h = layer(h)
        if l + 1 < a.layers:
            h = torch.nn.functional.elu(h)
    loss = torch.nn.functional.cross_entropy(h[train], y[train])
    loss.backward()
    opt.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
print(f"nodes {n} edges {len(src)} epoch_median_s {np.median(times[1:]):.4f} final_loss {loss.item():.4f}")
