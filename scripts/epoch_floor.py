#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The floor of one full-graph GCN training step (forward, loss, backward, Adam) on one process: the GEMM
flops at the measured GEMM rate plus the SpMM bytes (each CSR matrix read once, X read once, Y written
once) at the measured memory bandwidth. Shared by scripts/bench_fullgraph.sh (host) and
scripts/gpu_check.sh (device), so both compare against the same model of the step.

  epoch_floor.py NODES NNZ DIMS 'GEMM LINE' 'STREAM LINE'     (DIMS: 128,256,256,40)
prints one line 'floor S s = ...'."""
import re
import sys


def step_floor(n, nnz, dims, gemm_rate, bandwidth):
    """(seconds, flops, spmm bytes) of a GCN training step with layer widths `dims`."""
    flops = spmm_bytes = 0.0
    for l in range(len(dims) - 1):
        i, o = dims[l], dims[l + 1]
        flops += 2 * n * i * o * (2 if l == 0 else 3)  # forward, weight gradient, input gradient (not layer 0)
        w = min(i, o)
        one = 12 * nnz + 8 * (n + 1) + 2 * 4 * n * w  # CSR once, X read once, Y written once
        transform_first = o < i
        passes = (0 if l == 0 and not transform_first else 1) + (1 if (l > 0 or transform_first) else 0)
        spmm_bytes += passes * one
    return flops / gemm_rate + spmm_bytes / bandwidth, flops, spmm_bytes


def rates(gemm_line, stream_line):
    """The best GEMM rate (flop/s) of a `tessera bench gemm` line and the bandwidth (B/s) of `bench stream`."""
    gemm_rate = max(float(x) for x in re.findall(r"([0-9.]+) GFLOP/s", gemm_line)) * 1e9
    bandwidth = float(re.search(r"([0-9.]+) GB/s", stream_line).group(1)) * 1e9
    return gemm_rate, bandwidth


def describe(n, nnz, dims, gemm_line, stream_line):
    gemm_rate, bandwidth = rates(gemm_line, stream_line)
    floor, flops, spmm_bytes = step_floor(n, nnz, dims, gemm_rate, bandwidth)
    text = (f"{floor:.4f} s = GEMM {flops / 1e9:.1f} GFLOP at {gemm_rate / 1e9:.0f} GFLOP/s "
            f"({flops / gemm_rate:.4f} s) + SpMM {spmm_bytes / 1e9:.2f} GB at {bandwidth / 1e9:.1f} GB/s "
            f"({spmm_bytes / bandwidth:.4f} s)")
    return floor, text


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    floor, text = describe(int(sys.argv[1]), int(sys.argv[2]), [int(d) for d in sys.argv[3].split(",")],
                           sys.argv[4], sys.argv[5])
    print(f"floor {text}")
