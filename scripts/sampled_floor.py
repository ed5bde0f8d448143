#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The floor of one sampled training step (docs/BENCHMARKS.md, "The sampled step against its floor"), phase
by phase, from the step's block shapes (the `blocks` of a metrics file's epoch record: per graph layer, input
layer first, the mean destination rows, source rows and nonzeros per step and rank), the model's layer widths
and the machine's measured GEMM rates and memory bandwidth. Used by scripts/bench_sampled_step.sh.

  sampled_floor.py --bench-sizes METRICS MODEL DIMS
prints the `tessera bench gemm` sizes (m n k) that time every GEMM of the step;
  sampled_floor.py --table STEPS GEMM_FILE STREAM_FILE MODEL DIMS LABEL=METRICS [LABEL=METRICS ...]
prints each run's phases beside their floors (MODEL: sage or gcn; DIMS: 128,256,256,40)."""
import json
import re
import statistics
import sys


def layers(model, dims):
    """(in, out, terms, transform_first) of each graph layer, as GraphMultiply chooses on a P x 1 x 1 x 1 grid:
    A (H W) where the output is narrower than the input."""
    terms = 2 if model == "sage" else 1
    return [(dims[l], dims[l + 1], terms, dims[l + 1] < dims[l]) for l in range(len(dims) - 1)]


def step_gemms(blocks, model, dims):
    """The GEMMs of a step as (transposes, m, n, k, count) in `tessera bench gemm`'s terms: per term the forward
    H W (NN on rows x out x in), the weight gradient H^T G (TN, same arguments) and, past layer 0, the input
    gradient G W^T (NT on rows x in x out); rows are the destinations, or the sources where the layer
    transforms first."""
    for l, (i, o, terms, first) in enumerate(layers(model, dims)):
        rows = round(blocks[l]["src"] if first else blocks[l]["dst"])
        yield "NN", rows, o, i, terms
        yield "TN", rows, o, i, terms
        if l > 0:
            yield "NT", rows, i, o, terms


def spmm_bytes(blocks, model, dims):
    """Bytes the step's sparse products must move: each CSR read once (4-byte value, 8-byte column, 8 bytes
    per row), the dense input read once and the output written once; forward, and backward where a gradient
    flows through the block (past layer 0, or a transform-first layer, whose weight gradient needs A^T G)."""
    total = 0
    for l, (i, o, terms, first) in enumerate(layers(model, dims)):
        d, s, e = blocks[l]["dst"], blocks[l]["src"], blocks[l]["nnz"]
        w = o if first else i
        for t in range(terms):
            nnz, cols = (e, s) if t == 0 else (d, d)  # the aggregate block, then the self block
            total += 12 * nnz + 8 * d + 4 * cols * w + 4 * d * w
            if l > 0 or first:
                total += 12 * nnz + 8 * cols + 4 * d * w + 4 * cols * w
    return total


def parameters(model, dims):
    """Trained values: weights per term and a bias per layer, and BatchNorm's scale and shift per hidden layer."""
    return sum(terms * i * o + o for i, o, terms, _ in layers(model, dims)) + sum(2 * o for o in dims[1:-1])


def floors(blocks, model, dims, features, gemm_rates, bandwidth):
    """Seconds per phase of the step's floor, on one rank's core(s)."""
    gemm = sum(count * 2 * m * n * k / gemm_rates[(t, m, n, k)] for t, m, n, k, count in step_gemms(blocks, model, dims))
    # Each kept edge's column read, each destination's offsets; the block written, and its transpose where a
    # backward reads it (past layer 0, or a layer that transforms first: BatchNeeds::transposes).
    sample = sum(8 * b["nnz"] + 16 * b["dst"] + (12 * b["nnz"] + 8 * b["dst"])
                 + ((12 * b["nnz"] + 8 * b["src"]) if l > 0 or first else 0)
                 for l, (b, (_, _, _, first)) in enumerate(zip(blocks, layers(model, dims))))
    hidden = sum(16 * blocks[l]["dst"] * o for l, (_, o, _, _) in enumerate(layers(model, dims)) if l + 1 < len(blocks))
    seeds = blocks[-1]["dst"]
    return {
        "sample": sample / bandwidth,
        "gather (local rows, cache hits)": 8 * features * blocks[0]["src"] / bandwidth,
        "fetch (remote rows)": 0.0,
        "upload": 0.0,
        "GEMM": gemm,
        "SpMM": spmm_bytes(blocks, model, dims) / bandwidth,
        "loss": 8 * seeds * dims[-1] / bandwidth,
        "element-wise, norms, collectives": hidden / bandwidth,
        "optimizer": 28 * parameters(model, dims) / bandwidth,
    }


def measured(record, steps):
    """Seconds per phase of one epoch record, per step (phases: the mean over ranks; forward and backward:
    rank 0's), and the step."""
    phase = {k: v["mean_s"] / steps for k, v in record["phases"].items()}
    gather, fetch = record.get("gather_s"), record["fetch_s"]
    compute = (record["forward_s"] + record["backward_s"]) / steps
    out = {
        "sample": record["sample_s"] / steps,
        "gather (local rows, cache hits)": None if gather is None else (gather - fetch) / steps,
        "fetch (remote rows)": fetch / steps,
        "upload": None if record.get("upload_s") is None else record["upload_s"] / steps,
        "GEMM": phase["gemm"],
        "SpMM": phase["spmm"],
        "loss": phase["loss"],
        "element-wise, norms, collectives": compute - phase["gemm"] - phase["spmm"] - phase["loss"],
        "optimizer": record["optimizer_s"] / steps,
    }
    return out, record["epoch_s"] / steps, record["waited_s"] / steps


def last_epoch(path):
    records = [json.loads(line) for line in open(path) if line.strip()]
    return [r for r in records if r.get("kind") == "epoch"][-1]


def gemm_rates(path):
    """{(transposes, m, n, k): flop/s} from `tessera bench gemm` lines."""
    rates = {}
    for line in open(path):
        size = re.match(r"gemm (\d+)x(\d+)x(\d+):", line)
        if not size:
            continue
        m, n, k = (int(x) for x in size.groups())
        for t, gflops in re.findall(r"(NN|NT|TN) [0-9.]+ ms ([0-9.]+) GFLOP/s", line):
            rates[(t, m, n, k)] = max(rates.get((t, m, n, k), 0.0), float(gflops) * 1e9)
    return rates


def stream_bandwidth(path):
    """The mean triad bandwidth (B/s) of the `tessera bench stream` lines (one per rank, run at once)."""
    values = [float(x) for x in re.findall(r"triad: [0-9]+ floats, [0-9.]+ ms, ([0-9.]+) GB/s", open(path).read())]
    return statistics.mean(values) * 1e9


def table(steps, gemm_file, stream_file, model, dims, runs):
    """Lines: every phase's floor beside each run's time, each run's step against the step's floor."""
    rates, bandwidth = gemm_rates(gemm_file), stream_bandwidth(stream_file)
    records = [(label, last_epoch(path)) for label, path in runs]
    blocks = next(r["blocks"] for _, r in records if "blocks" in r)
    floor = floors(blocks, model, dims, dims[0], rates, bandwidth)
    results = [(label, measured(r, steps)) for label, r in records]
    width = max(len(label) for label, _ in runs)
    lines = [f"bandwidth {bandwidth / 1e9:.2f} GB/s per rank; GEMM "
             + ", ".join(f"{t} {m}x{n}x{k} {r / 1e9:.0f}" for (t, m, n, k), r in sorted(rates.items()))
             + " GFLOP/s",
             "blocks per step and rank (input layer first): "
             + "; ".join(f"{b['dst']:.0f} x {b['src']:.0f}, {b['nnz']:.0f} nonzeros" for b in blocks),
             "",
             f"{'phase (seconds per step)':34} {'floor':>8} " + " ".join(f"{label:>{max(width, 14)}}" for label, _ in runs)]
    for phase, f in floor.items():
        cells = []
        for _, (m, _, _) in results:
            v = m[phase]
            cells.append(f"{'-':>{max(width, 14)}}" if v is None else
                         f"{v:8.4f} ({v / f:5.1f}x)".rjust(max(width, 14)) if f > 0 else f"{v:8.4f}".rjust(max(width, 14)))
        lines.append(f"{phase:34} {f:8.4f} " + " ".join(cells))
    total = sum(floor.values())
    lines.append(f"{'step (waited for the sample)':34} {total:8.4f} "
                 + " ".join(f"{s:8.4f} ({s / total:5.2f}x)".rjust(max(width, 14)) + "" for _, (_, s, _) in results))
    lines.append(f"{'  of which waiting for the sample':34} {'':8} "
                 + " ".join(f"{w:8.4f}".rjust(max(width, 14)) for _, (_, _, w) in results))
    return lines


def main(argv):
    if argv[:1] == ["--bench-sizes"]:
        metrics, model, dims = argv[1], argv[2], [int(d) for d in argv[3].split(",")]
        blocks = last_epoch(metrics)["blocks"]
        for t, m, n, k, _ in step_gemms(blocks, model, dims):
            print(m, n, k)
        return 0
    if argv[:1] == ["--table"]:
        steps, gemm_file, stream_file, model, dims = int(argv[1]), argv[2], argv[3], argv[4], argv[5]
        runs = [tuple(a.split("=", 1)) for a in argv[6:]]
        for line in table(steps, gemm_file, stream_file, model, [int(d) for d in dims.split(",")], runs):
            print(line)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
