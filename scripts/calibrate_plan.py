#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Holds `tessera plan`'s machine profiles against published epoch times, and fits their free terms.

The points (scripts/calibration/plexus-epochs.json) are Plexus's published epochs of a 3-layer GCN on
Perlmutter and Frontier. For each point the script writes a sizes-only graph file (plan reads no
adjacency), runs `tessera plan --schedule plexus` (the layers as Plexus runs them: every layer
aggregation first) and takes its fastest grid's epoch: the prediction of the grid it would choose, as
Plexus reports its best grid.

  calibrate_plan.py                  the table of predicted against published for the built-in profiles;
                                     exit status 1 where a point is outside 0.8-1.25x
  calibrate_plan.py --fit            also fits each machine's free terms (least squares of log ratios,
                                     every other constant held) and prints the table of the fitted profile
Options: --tessera PATH (default build/apps/tessera), --machine NAME (repeatable), --write DIR (the fitted
profiles as machine files).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
POINTS = os.path.join(HERE, "calibration", "plexus-epochs.json")
LOW, HIGH = 0.8, 1.25

# The terms each profile leaves to the fit (machine-file keys), searched as factors on the built-in values.
# Every other constant is a vendor figure or a published measurement (builtin_machine in perf_model.cpp).
# Frontier has four points and four free terms: its fit is exact by construction, not a check.
FREE = {
    "perlmutter": ["beta_intra", "beta_inter", "layer_seconds"],
    "frontier": ["beta_intra", "beta_inter", "gathered_element_bytes", "layer_seconds"],
}
# Terms tied to a free one (key: (free term, rule)): a row narrower than 32 columns costs what 32 cost, as on
# the A100's published curve.
TIED = {"min_row_bytes": ("gathered_element_bytes", lambda v: 32 * v)}


# Each free term stays within this factor (its log) of its built-in value: a fit that wants more is a sign
# that the model lacks a cost, not a constant to set.
BOUND = math.log(10)


def sizes_only_graph(path, g):
    """A graph file with the sizes of `g` and no data: every dataset declared, none written."""
    nodes, edges = g["nodes"], g["nonzeros"] - g["nodes"]  # the file stores edges; GCN adds the self loops
    with h5py.File(path, "w") as f:
        f.attrs.update(format="tessera-graph", version=1, name=g["name"], source="sizes only",
                       num_nodes=nodes, num_edges=edges, num_features=g["features"],
                       num_classes=g["classes"], symmetric=1)
        f.create_dataset("graph/indptr", shape=(nodes + 1,), dtype="i8")
        f.create_dataset("graph/indices", shape=(edges,), dtype="i8")
        f.create_dataset("node/features", shape=(nodes, g["features"]), dtype="f4")
        f.create_dataset("node/labels", shape=(nodes,), dtype="i8")


def plan_command(tessera, graph, ranks, model, machine_args):
    return [tessera, "plan", "--data", graph, "--ranks", str(ranks), "--layers", str(model["layers"]),
            "--hidden", str(model["hidden"]), "--schedule", "plexus"] + machine_args


def fastest_grid(output):
    """The first row of `tessera plan`'s table: the grid it would choose."""
    for line in output.splitlines():
        f = line.split()
        if f and f[0] == "1":
            return dict(grid=f[1], epoch=float(f[2]), comm=float(f[3]), spmm=float(f[4]), gemm=float(f[5]),
                        other=float(f[6]))
    raise RuntimeError("no plan in: " + output)


def plan_all(commands):
    """Runs the plans side by side (each is mostly MPI's start-up) and returns their fastest grids."""
    runs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in commands]
    outputs = [r.communicate()[0] for r in runs]
    for c, r in zip(commands, runs):
        if r.returncode != 0:
            raise RuntimeError(" ".join(c) + " failed")
    return [fastest_grid(o) for o in outputs]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera", default=os.path.join(HERE, "..", "build", "apps", "tessera"))
    ap.add_argument("--machine", action="append", choices=sorted(FREE))
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--write", metavar="DIR")
    a = ap.parse_args()
    with open(POINTS) as f:
        data = json.load(f)
    machines = a.machine or sorted(FREE, reverse=True)
    with tempfile.TemporaryDirectory(prefix="tessera-calibrate-") as work:
        return calibrate(a, data, machines, work)


def calibrate(a, data, machines, work):
    graphs = {}
    for name, g in data["graphs"].items():
        graphs[name] = os.path.join(work, name + ".h5")
        sizes_only_graph(graphs[name], g)
    worst = 0.0
    for machine in machines:
        points = [p for p in data["points"] if p["machine"] == machine]
        base_file = os.path.join(work, machine + ".json")
        plan_all([plan_command(a.tessera, graphs[points[0]["graph"]], 1, data["model"],
                               ["--machine", machine, "--save-machine", base_file])])
        with open(base_file) as f:
            base = json.load(f)
        profile = dict(base)

        def predictions(p):
            path = os.path.join(work, machine + "-try.json")
            with open(path, "w") as f:
                json.dump(p, f)
            return plan_all([plan_command(a.tessera, graphs[q["graph"]], q["ranks"], data["model"],
                                          ["--machine-file", path]) for q in points])

        if a.fit:
            from scipy.optimize import minimize  # only the fit needs SciPy

            free = FREE[machine]
            tied = {key: t for key, t in TIED.items() if t[0] in free}

            def with_factors(x):
                p = dict(base)
                for key, v in zip(free, x):
                    p[key] = (base[key] or 1e-3) * math.exp(v)
                for key, (source, rule) in tied.items():
                    p[key] = rule(p[source])
                return p

            def residuals(x):
                return [math.log(r["epoch"] / q["epoch_s"]) for r, q in zip(predictions(with_factors(x)), points)]

            # The printed epochs have four decimals: a derivative-free search, not finite differences.
            n = len(free)
            simplex = np.vstack([np.zeros(n), 0.7 * np.eye(n)])  # factors of 2 around the built-in values
            fit = minimize(lambda x: sum(r * r for r in residuals(x)), np.zeros(n), method="Nelder-Mead",
                           bounds=[(-BOUND, BOUND)] * n,
                           options=dict(xatol=0.01, fatol=1e-4, initial_simplex=simplex))
            profile = with_factors(fit.x)
            print(f"{machine}: fitted " + ", ".join(f"{k} {profile[k]:.4g}" for k in free + list(tied)))
            if a.write:
                os.makedirs(a.write, exist_ok=True)
                with open(os.path.join(a.write, machine + ".json"), "w") as f:
                    json.dump(profile, f, indent=2)
        print(f"{'machine':<11}{'graph':<10}{'ranks':>5}  {'grid':<8}{'published':>10}{'predicted':>10}"
              f"{'ratio':>7}   comm / spmm / gemm / other (s)")
        for r, q in zip(predictions(profile), points):
            ratio = r["epoch"] / q["epoch_s"]
            worst = max(worst, abs(math.log(ratio)))
            print(f"{machine:<11}{q['graph']:<10}{q['ranks']:>5}  {r['grid']:<8}{q['epoch_s']:>10.3f}"
                  f"{r['epoch']:>10.4f}{ratio:>7.2f}   {r['comm']:.4f} / {r['spmm']:.4f} / {r['gemm']:.4f} / "
                  f"{r['other']:.4f}")
    ok = math.log(LOW) <= -worst and worst <= math.log(HIGH)
    print(f"every point within {LOW}-{HIGH}x: {'yes' if ok else 'no'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
