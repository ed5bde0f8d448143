#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The floor of one full-graph GAT training step (forward, loss, backward, Adam) on one process
(docs/BENCHMARKS.md, "GAT against PyTorch and its floor"): the projections' GEMM flops at the measured GEMM
rate, plus the bytes of every pass over the edges and the nodes at the measured memory bandwidth, each array
of a pass read or written once, per head:

  forward, per layer (n nodes, e edges with the self loops, H heads of F, zw = H F, CSR of 4-byte columns):
    node terms        z read, src and dst written                          4 n zw + 8 n H
    destination move  dst read, written                                    8 n H
    row max           CSR, src, dst                                        4 e + 8 n + 8 n H
    exponentials      CSR, src, dst, alpha written, row sums written       4 e + 8 n + 12 n H + 4 e H
    normalize         alpha read and written, row sums                     8 e H + 4 n H
    weighted sum      CSR, alpha, z, y written                             4 e + 8 n + 4 e H + 8 n zw
    heads, epilogue   y read, pre and out written                          4 n zw + 8 n w
  backward, per layer: the epilogue's (3 n w), the heads' (4 n w + 4 n zw), the SDDMM (CSR, alpha, g_y, z,
  g_alpha written: 4 e + 8 n + 8 e H + 8 n zw), the softmax's (CSR, alpha, g_alpha read and written, src, dst,
  row terms: 4 e + 8 n + 12 e H + 16 n H), the transposed sum (CSR, positions, alpha, g_y, g_z written:
  12 e + 8 n + 4 e H + 8 n zw), the source sums (CSR, positions, g_score: 12 e + 8 n + 4 e H + 4 n H), the
  moved terms and the score terms' gradients (4 n zw + 16 n H + 4 n zw).
GEMMs: forward x W (n, zw, in), weight gradient (in x zw, n reduced), past layer 0 the input gradient.

  gat_floor.py NODES EDGES IN HIDDEN HEADS CLASSES OUTPUT_HEADS LAYERS 'GEMM LINE' 'STREAM LINE'
prints one line 'floor S s = GEMM F GFLOP at R GFLOP/s + passes B GB at W GB/s'."""
import sys

from epoch_floor import rates


def layers(n_in, hidden, heads, classes, output_heads, depth):
    """(in, H, F, w) of each layer: its input width, heads, width per head and output width."""
    width = n_in
    for l in range(depth):
        last = l + 1 == depth
        h, f = (output_heads, classes) if last else (heads, hidden)
        yield width, h, f, (f if last else h * f)
        width = h * f


def step_floor(n, e, n_in, hidden, heads, classes, output_heads, depth, gemm_rate, bandwidth):
    flops = passes = 0.0
    for l, (i, h, f, w) in enumerate(layers(n_in, hidden, heads, classes, output_heads, depth)):
        zw = h * f
        csr = 4 * e + 8 * n
        forward = (4 * n * zw + 8 * n * h) + 8 * n * h + (csr + 8 * n * h) + (csr + 12 * n * h + 4 * e * h) + \
                  (8 * e * h + 4 * n * h) + (csr + 4 * e * h + 8 * n * zw) + (4 * n * zw + 8 * n * w)
        backward = 3 * n * w + (4 * n * w + 4 * n * zw) + (csr + 8 * e * h + 8 * n * zw) + \
                   (csr + 12 * e * h + 16 * n * h) + (csr + 8 * e + 4 * e * h + 8 * n * zw) + \
                   (csr + 8 * e + 4 * e * h + 4 * n * h) + (8 * n * zw + 16 * n * h)
        passes += forward + backward
        flops += 2 * n * i * zw * (2 if l == 0 else 3)
    return flops / gemm_rate + passes / bandwidth, flops, passes


def main():
    n, e, n_in, hidden, heads, classes, output_heads, depth = (int(v) for v in sys.argv[1:9])
    gemm_rate, bandwidth = rates(sys.argv[9], sys.argv[10])
    seconds, flops, passes = step_floor(n, e, n_in, hidden, heads, classes, output_heads, depth, gemm_rate, bandwidth)
    print(f"floor {seconds:.4f} s = GEMM {flops / 1e9:.1f} GFLOP at {gemm_rate / 1e9:.0f} GFLOP/s + passes "
          f"{passes / 1e9:.2f} GB at {bandwidth / 1e9:.1f} GB/s")


if __name__ == "__main__":
    main()
