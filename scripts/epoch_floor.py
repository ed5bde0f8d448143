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


def spmm_passes(dims):
    """(width, SpMM passes) of each layer of a GCN with layer widths `dims`: forward and backward, except
    layer 0's backward (no input gradient) and its forward when it aggregates the fixed input first."""
    for l in range(len(dims) - 1):
        i, o = dims[l], dims[l + 1]
        transform_first = o < i
        yield min(i, o), (0 if l == 0 and not transform_first else 1) + (1 if (l > 0 or transform_first) else 0)


def step_floor(n, nnz, dims, gemm_rate, bandwidth):
    """(seconds, flops, spmm bytes) of a GCN training step with layer widths `dims`."""
    flops = sum(2 * n * dims[l] * dims[l + 1] * (2 if l == 0 else 3)  # forward, weight and input gradients
                for l in range(len(dims) - 1))
    # CSR once, X read once, Y written once
    spmm_bytes = sum(p * (12 * nnz + 8 * (n + 1) + 2 * 4 * n * w) for w, p in spmm_passes(dims))
    return flops / gemm_rate + spmm_bytes / bandwidth, flops, spmm_bytes


def spmm_gathered_bytes(n, nnz, dims):
    """The SpMM bytes of the same step when every nonzero reads its row of X (a random graph whose X does not
    stay in cache): what the floor's "X read once" leaves out."""
    return sum(p * (12 * nnz + 8 * (n + 1) + 4 * nnz * w + 4 * n * w) for w, p in spmm_passes(dims))


def phase_table(n, nnz, dims, gemm_line, stream_line, phases, step):
    """Lines comparing a step's measured phases (seconds: gemm, spmm, loss) with their own floors."""
    gemm_rate, bandwidth = rates(gemm_line, stream_line)
    _, flops, spmm_bytes = step_floor(n, nnz, dims, gemm_rate, bandwidth)
    gathered = spmm_gathered_bytes(n, nnz, dims)
    gemm, spmm, loss = phases
    rest = step - gemm - spmm - loss
    return [
        f"  GEMM         {gemm:.4f} s  {flops / gemm / 1e9:6.1f} GFLOP/s   {gemm * gemm_rate / flops:.2f}x its floor "
        f"({flops / gemm_rate:.4f} s at {gemm_rate / 1e9:.0f} GFLOP/s)",
        f"  SpMM         {spmm:.4f} s  {spmm_bytes / spmm / 1e9:6.1f} GB/s (X read once), "
        f"{gathered / spmm / 1e9:.1f} GB/s (a row per nonzero)   {spmm * bandwidth / spmm_bytes:.2f}x / "
        f"{spmm * bandwidth / gathered:.2f}x those floors at {bandwidth / 1e9:.1f} GB/s",
        f"  loss         {loss:.4f} s",
        f"  element-wise and optimizer (the rest) {rest:.4f} s (not in the floor)",
    ]


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
