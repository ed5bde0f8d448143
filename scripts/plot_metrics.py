#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Plots `tessera train --metrics` files (JSON lines), one line, bar or stack per run.

  plot_metrics.py RUN.jsonl... -o DIR [--title TEXT]

Writes into DIR:
  loss.png            training loss per epoch
  accuracy.png        validation and test accuracy per evaluated epoch, against epoch and wall-clock time
  epoch_time.png      seconds per epoch: mean over the epochs after the first, with min-max whiskers
  breakdown.png       where each run's time went: load, compute, communication, sampling, evaluation
  imbalance.png       the slowest rank over the mean rank (max/mean) per phase, over the epochs after the first
  bytes.png           bytes sent by the busiest rank per epoch (MiB, mean over epochs)
  scaling.png         time per epoch and parallel efficiency against ranks, for runs of one dataset and mode
                      on several rank counts (not written without such runs)
  cache_hit_rate.png  the prefetch cache's hit rate per step (sampled runs only; not written without one)
  plots.json          each plot's series (the run labels drawn), for scripts that check them
A run is labelled with its file name without `.jsonl` (ogb_suite.sh names them DATASET-MODE-GRID).
Needs matplotlib: without it here, the script runs itself under a Python that has it (Debian's
/usr/bin/python3 with python3-matplotlib, which scripts/setup.sh installs) or says which to install.
"""
import argparse
import json
import os
import subprocess
import sys


def label_of(path):
    name = os.path.basename(path)
    return name[:-len(".jsonl")] if name.endswith(".jsonl") else name


def read_run(path):
    """The header, epoch records and step records of one metrics file; a malformed line is an error naming it."""
    header, epochs, steps = {}, [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"plot_metrics: {path}: line {number}: not JSON ({e.msg})")
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind == "header":
                header = record
            elif kind == "step":
                steps.append(record)
            elif isinstance(record, dict) and "epoch" in record:
                epochs.append(record)
            else:
                raise SystemExit(f"plot_metrics: {path}: line {number}: not a tessera metrics record")
    if not epochs:
        raise SystemExit(f"plot_metrics: {path}: no epoch records")
    return {"label": label_of(path), "header": header, "epochs": epochs, "steps": steps}


def steady(values):
    """The epochs after the first (one-time costs), or the only one."""
    return values[1:] if len(values) > 1 else values


def mean(values):
    return sum(values) / len(values) if values else 0.0


def save(plt, fig, path, series, written):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written[os.path.basename(path)] = series


def line_plot(plt, runs, key, ylabel, path, title, written):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    series = []
    for run in runs:
        points = [(r["epoch"], r[key]) for r in run["epochs"] if key in r]
        if points:
            ax.plot(*zip(*points), label=run["label"], linewidth=1.2)
            series.append(run["label"])
    ax.set(xlabel="epoch", ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(plt, fig, path, series, written)


def accuracy_plot(plt, runs, path, title, written):
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5), sharey=True)
    series = []
    for column, (key, name) in enumerate((("valid_acc", "validation"), ("test_acc", "test"))):
        for run in runs:
            clock, points_epoch, points_time = 0.0, [], []
            for r in run["epochs"]:
                clock += r.get("epoch_s", 0.0)
                if key in r:
                    points_epoch.append((r["epoch"], r[key]))
                    points_time.append((clock, r[key]))
            if not points_epoch:
                continue
            marker = "." if len(points_epoch) < 30 else None
            axes[0][column].plot(*zip(*points_epoch), label=run["label"], linewidth=1.2, marker=marker)
            axes[1][column].plot(*zip(*points_time), label=run["label"], linewidth=1.2, marker=marker)
            if column == 0:
                series.append(run["label"])
        axes[0][column].set(xlabel="epoch", title=f"{title}: {name} accuracy")
        axes[1][column].set(xlabel="training time (s, evaluation included)")
        for row in axes:
            row[column].grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy")
    axes[1][0].set_ylabel("accuracy")
    axes[0][1].legend(fontsize=7)
    save(plt, fig, path, series, written)


def bar_chart(plt, labels, values, ylabel, title, path, written, **bar_options):
    """One bar per run."""
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(labels) + 2), 4.2))
    ax.bar(range(len(values)), values, color="#4878a8", **bar_options)
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel=ylabel, title=title)
    ax.grid(axis="y", alpha=0.3)
    save(plt, fig, path, labels, written)


def epoch_time_plot(plt, runs, path, title, written):
    labels = [run["label"] for run in runs]
    times = [steady([r["epoch_s"] for r in run["epochs"]]) for run in runs]
    means = [mean(t) for t in times]
    below = [m - min(t) for m, t in zip(means, times)]
    above = [max(t) - m for m, t in zip(means, times)]
    bar_chart(plt, labels, means, "seconds per epoch (after the first; min-max)", f"{title}: epoch time", path,
              written, yerr=[below, above], capsize=4)


def breakdown(run):
    """Seconds of the whole run by part: the load once, then each epoch's parts summed."""
    epochs = run["epochs"]
    load = sum(p.get("s", 0.0) for p in epochs[0].get("load_phases", []))
    communication = sum(r.get("comm_s", 0.0) for r in epochs)
    # The time the trainer waited for batches (mini-batch: sample_wait_s; sampled: waited_s).
    sampling = sum(r.get("sample_wait_s", r.get("waited_s", 0.0)) for r in epochs)
    evaluation = sum(r.get("eval_s", 0.0) for r in epochs)
    total = sum(r.get("epoch_s", 0.0) for r in epochs)
    compute = max(0.0, total - communication - sampling - evaluation)
    return {"load": load, "compute": compute, "communication": communication, "sampling": sampling,
            "evaluation": evaluation}


def breakdown_plot(plt, runs, path, title, written):
    parts = ["load", "compute", "communication", "sampling", "evaluation"]
    colors = ["#8c8c8c", "#4878a8", "#d1603d", "#6aa84f", "#b39ddb"]
    values = [breakdown(run) for run in runs]
    labels = [run["label"] for run in runs]
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(labels) + 3), 4.5))
    bottom = [0.0] * len(runs)
    for part, color in zip(parts, colors):
        heights = [v[part] for v in values]
        ax.bar(range(len(runs)), heights, bottom=bottom, label=part, color=color)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="seconds over the run (rank 0)", title=f"{title}: where the time went")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    save(plt, fig, path, labels, written)


def imbalance_plot(plt, runs, path, title, written):
    phases = sorted({name for run in runs for r in run["epochs"] for name in r.get("phases", {})})
    if not phases:
        return
    fig, ax = plt.subplots(figsize=(min(16, 3 + 0.3 * len(phases) * len(runs)), 4.5))
    width = 0.8 / len(runs)
    for k, run in enumerate(runs):
        ratios = [mean(steady([r["phases"][p]["max_over_mean"] for r in run["epochs"] if p in r.get("phases", {})]))
                  for p in phases]
        ax.bar([i + k * width for i in range(len(phases))], ratios, width, label=run["label"])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(phases))])
    ax.set_xticklabels(phases, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="slowest rank / mean rank", title=f"{title}: imbalance per phase")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    save(plt, fig, path, [run["label"] for run in runs], written)


def bytes_plot(plt, runs, path, title, written):
    labels = [run["label"] for run in runs]
    sent = [mean(steady([r.get("bytes_max_rank", 0) for r in run["epochs"]])) / 2**20 for run in runs]
    bar_chart(plt, labels, sent, "MiB sent by the busiest rank per epoch", f"{title}: bytes", path, written)


def scaling_groups(runs):
    """(dataset, mode) -> [(ranks, seconds per epoch)] for groups with runs on two or more rank counts."""
    groups = {}
    for run in runs:
        h = run["header"]
        if "ranks" not in h:
            continue
        key = (h.get("dataset", {}).get("name", "?"), h.get("mode", "?"))
        groups.setdefault(key, {})[h["ranks"]] = mean(steady([r["epoch_s"] for r in run["epochs"]]))
    return {k: sorted(v.items()) for k, v in groups.items() if len(v) >= 2}


def scaling_plot(plt, runs, path, title, written):
    groups = scaling_groups(runs)
    if not groups:
        return
    fig, (time_ax, eff_ax) = plt.subplots(1, 2, figsize=(10, 4.2))
    series = []
    for (dataset, mode), points in sorted(groups.items()):
        ranks = [p for p, _ in points]
        seconds = [s for _, s in points]
        label = f"{dataset} {mode}"
        time_ax.plot(ranks, seconds, marker="o", label=label)
        # Strong scaling from the fewest ranks: T(p0) p0 / (T(p) p).
        eff_ax.plot(ranks, [seconds[0] * ranks[0] / (s * p) for p, s in points], marker="o", label=label)
        series.append(label)
    for ax in (time_ax, eff_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks")
        ax.grid(alpha=0.3)
    time_ax.set_yscale("log")
    time_ax.set(ylabel="seconds per epoch (after the first)", title=f"{title}: strong scaling")
    eff_ax.set(ylabel="parallel efficiency", ylim=(0, 1.1), title="efficiency vs the fewest ranks")
    eff_ax.legend(fontsize=7)
    save(plt, fig, path, series, written)


def hit_rate_plot(plt, runs, path, title, written):
    sampled = [(run["label"], run["steps"]) for run in runs if any("hit_rate" in s for s in run["steps"])]
    if not sampled:
        return
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, steps in sampled:
        rates = [s["hit_rate"] for s in steps if "hit_rate" in s]
        ax.plot(range(1, len(rates) + 1), rates, label=label, linewidth=1.0)
    ax.set(xlabel="step", ylabel="cache hit rate", ylim=(0, 1), title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(plt, fig, path, [label for label, _ in sampled], written)


def import_pyplot():
    """matplotlib's pyplot; without it, re-runs this script under a Python that has it, or exits saying which."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        pass
    for python in ("/usr/bin/python3", "/usr/local/bin/python3"):
        # By path, not by the file it resolves to: a venv's python3 links to /usr/bin/python3 but has other
        # packages.
        if os.path.abspath(python) == os.path.abspath(sys.executable) or not os.access(python, os.X_OK):
            continue
        if subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            os.execv(python, [python] + sys.argv)
    raise SystemExit(f"plot_metrics: matplotlib is missing for {sys.executable} and for /usr/bin/python3 "
                     "(Debian: apt-get install python3-matplotlib, or run this script with a Python that has it)")


def main():
    parser = argparse.ArgumentParser(description="Plot tessera --metrics files")
    parser.add_argument("runs", nargs="+", help="metrics files (JSON lines)")
    parser.add_argument("-o", "--output", required=True, help="directory for the PNG files")
    parser.add_argument("--title", default="tessera", help="title prefix")
    args = parser.parse_args()
    for path in args.runs:
        if not os.path.isfile(path):
            raise SystemExit(f"plot_metrics: {path}: no such file")
    runs = [read_run(path) for path in args.runs]
    plt = import_pyplot()
    os.makedirs(args.output, exist_ok=True)
    out = lambda name: os.path.join(args.output, name)
    title, written = args.title, {}
    line_plot(plt, runs, "loss", "training loss", out("loss.png"), f"{title}: loss", written)
    accuracy_plot(plt, runs, out("accuracy.png"), title, written)
    epoch_time_plot(plt, runs, out("epoch_time.png"), title, written)
    breakdown_plot(plt, runs, out("breakdown.png"), title, written)
    imbalance_plot(plt, runs, out("imbalance.png"), title, written)
    bytes_plot(plt, runs, out("bytes.png"), title, written)
    scaling_plot(plt, runs, out("scaling.png"), title, written)
    hit_rate_plot(plt, runs, out("cache_hit_rate.png"), f"{title}: prefetch cache", written)
    with open(out("plots.json"), "w") as f:
        json.dump(written, f, indent=1, sort_keys=True)
    print(f"plot_metrics: wrote {', '.join(written)} to {args.output}")


if __name__ == "__main__":
    sys.exit(main())
