#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The floor of one full-graph GCN training step (forward, loss, backward, Adam) on one process: the GEMM
flops at the measured GEMM rate plus the SpMM bytes (each CSR matrix read once, X read once, Y written
once) at the measured memory bandwidth. Shared by scripts/bench_fullgraph.sh (host) and
scripts/gpu_check.sh (device), so both compare against the same model of the step.

  epoch_floor.py NODES NNZ DIMS 'GEMM LINE' 'STREAM LINE'     (DIMS: 128,256,256,40)
prints one line 'floor S s = ...';
  epoch_floor.py --bench-sizes NODES DIMS
prints the `tessera bench gemm` sizes (m n k) that time every GEMM of the step (shape_floor reads them)."""
import re
import sys


def spmm_passes(dims):
    """(width, SpMM passes) of each layer of a GCN with layer widths `dims`: forward and backward, except
    layer 0's backward (no input gradient) and its forward when it aggregates the fixed input first."""
    for l in range(len(dims) - 1):
        i, o = dims[l], dims[l + 1]
        transform_first = o < i
        yield min(i, o), (0 if l == 0 and not transform_first else 1) + (1 if (l > 0 or transform_first) else 0)


def step_gemms(n, dims):
    """The GEMMs of a GCN training step as (what, transposes, m, n, k) in `tessera bench gemm`'s terms: for
    layer l (i -> o) the forward H W is NN on (n, o, i), the weight gradient H^T G is TN on the same
    arguments (i x o, n reduced) and, past layer 0, the input gradient G W^T is NT on (n, i, o)."""
    for l in range(len(dims) - 1):
        i, o = dims[l], dims[l + 1]
        yield f"forward {l}", "NN", n, o, i
        yield f"weight gradient {l}", "TN", n, o, i
        if l > 0:
            yield f"input gradient {l}", "NT", n, i, o


def step_floor(n, nnz, dims, gemm_rate, bandwidth):
    """(seconds, flops, spmm bytes) of a GCN training step with layer widths `dims`."""
    flops = sum(2 * m * nn * k for _, _, m, nn, k in step_gemms(n, dims))
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


def bench_gemm_sizes(n, dims):
    """The distinct --m --n --k of `tessera bench gemm` runs that time every GEMM of the step."""
    return sorted({(m, nn, k) for _, _, m, nn, k in step_gemms(n, dims)})


def shape_rates(lines):
    """{(m, n, k, transposes): best GFLOP/s} over `tessera bench gemm` lines (several libraries' runs)."""
    rates = {}
    for line in lines:
        size = re.search(r"gemm (\d+)x(\d+)x(\d+):", line)
        if not size:
            continue
        m, nn, k = (int(x) for x in size.groups())
        for trans, rate in re.findall(r"(NN|NT|TN) [0-9.]+ ms ([0-9.]+) GFLOP/s", line):
            key = (m, nn, k, trans)
            rates[key] = max(rates.get(key, 0.0), float(rate) * 1e9)
    return rates


def shape_floor(n, dims, lines):
    """(seconds, table lines): the step's GEMMs each at the best rate measured for its own shape and
    transposes (the narrow and transposed shapes run below the square NN rate the floor takes)."""
    rates = shape_rates(lines)
    total, rows = 0.0, []
    for what, trans, m, nn, k in step_gemms(n, dims):
        flops = 2.0 * m * nn * k
        rate = rates[(m, nn, k, trans)]
        total += flops / rate
        rows.append(f"    {what:18s} {trans} {m}x{nn}x{k}  {rate / 1e9:6.1f} GFLOP/s  {flops / rate:.4f} s")
    return total, rows


def describe(n, nnz, dims, gemm_line, stream_line):
    gemm_rate, bandwidth = rates(gemm_line, stream_line)
    floor, flops, spmm_bytes = step_floor(n, nnz, dims, gemm_rate, bandwidth)
    text = (f"{floor:.4f} s = GEMM {flops / 1e9:.1f} GFLOP at {gemm_rate / 1e9:.0f} GFLOP/s "
            f"({flops / gemm_rate:.4f} s) + SpMM {spmm_bytes / 1e9:.2f} GB at {bandwidth / 1e9:.1f} GB/s "
            f"({spmm_bytes / bandwidth:.4f} s)")
    return floor, text


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--bench-sizes":  # epoch_floor.py --bench-sizes NODES DIMS
        for size in bench_gemm_sizes(int(sys.argv[2]), [int(d) for d in sys.argv[3].split(",")]):
            print(*size)
        sys.exit(0)
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    floor, text = describe(int(sys.argv[1]), int(sys.argv[2]), [int(d) for d in sys.argv[3].split(",")],
                           sys.argv[4], sys.argv[5])
    print(f"floor {text}")
