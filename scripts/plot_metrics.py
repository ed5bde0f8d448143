#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Plots `tessera train --metrics` files (JSON lines), one line or bar per run.

  plot_metrics.py RUN.jsonl... -o DIR [--title TEXT]

Writes into DIR:
  loss.png            training loss per epoch
  accuracy.png        validation and test accuracy per evaluated epoch
  epoch_time.png      mean seconds per epoch (the first epoch left out when there are more)
  bytes.png           bytes sent by the busiest rank per epoch (MiB, mean over epochs)
  cache_hit_rate.png  the prefetch cache's hit rate per step (sampled runs only; not written without one)
A run is labelled with its file name without `.jsonl` (ogb_suite.sh names them DATASET-MODE-GRID).
Needs matplotlib (Debian: python3-matplotlib, installed by scripts/setup.sh).
"""
import argparse
import json
import os
import sys


def read_run(path):
    """Epoch records and step records of one metrics file; a malformed line is an error naming it."""
    epochs, steps = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"plot_metrics: {path}: line {number}: not JSON ({e.msg})")
            if not isinstance(record, dict) or "epoch" not in record:
                raise SystemExit(f"plot_metrics: {path}: line {number}: not a tessera metrics record")
            (steps if record.get("kind") == "step" else epochs).append(record)
    if not epochs:
        raise SystemExit(f"plot_metrics: {path}: no epoch records")
    return epochs, steps


def label_of(path):
    name = os.path.basename(path)
    return name[:-len(".jsonl")] if name.endswith(".jsonl") else name


def steady_mean(values):
    values = values[1:] if len(values) > 1 else values
    return sum(values) / len(values)


def line_plot(plt, runs, key, ylabel, path, title):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, (epochs, _) in runs:
        points = [(r["epoch"], r[key]) for r in epochs if key in r]
        if points:
            ax.plot(*zip(*points), label=label, linewidth=1.2)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def accuracy_plot(plt, runs, path, title):
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, key, name in ((axes[0], "valid_acc", "validation"), (axes[1], "test_acc", "test")):
        for label, (epochs, _) in runs:
            points = [(r["epoch"], r[key]) for r in epochs if key in r]
            if points:
                ax.plot(*zip(*points), label=label, linewidth=1.2, marker="." if len(points) < 30 else None)
        ax.set_xlabel("epoch")
        ax.set_title(f"{title}: {name} accuracy")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bar_plot(plt, labels, values, ylabel, path, title):
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(labels) + 2), 4.2))
    ax.bar(range(len(values)), values, color="#4878a8")
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def hit_rate_plot(plt, runs, path, title):
    sampled = [(label, steps) for label, (_, steps) in runs if any("hit_rate" in s for s in steps)]
    if not sampled:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, steps in sampled:
        rates = [s["hit_rate"] for s in steps if "hit_rate" in s]
        ax.plot(range(1, len(rates) + 1), rates, label=label, linewidth=1.0)
    ax.set_xlabel("step")
    ax.set_ylabel("cache hit rate")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main():
    parser = argparse.ArgumentParser(description="Plot tessera --metrics files")
    parser.add_argument("runs", nargs="+", help="metrics files (JSON lines)")
    parser.add_argument("-o", "--output", required=True, help="directory for the PNG files")
    parser.add_argument("--title", default="tessera", help="title prefix")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("plot_metrics: matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    runs = []
    for path in args.runs:
        if not os.path.isfile(path):
            raise SystemExit(f"plot_metrics: {path}: no such file")
        runs.append((label_of(path), read_run(path)))
    os.makedirs(args.output, exist_ok=True)
    out = lambda name: os.path.join(args.output, name)
    title = args.title
    line_plot(plt, runs, "loss", "training loss", out("loss.png"), f"{title}: loss")
    accuracy_plot(plt, runs, out("accuracy.png"), title)
    labels = [label for label, _ in runs]
    times = [steady_mean([r["epoch_s"] for r in epochs]) for _, (epochs, _) in runs]
    bar_plot(plt, labels, times, "seconds per epoch", out("epoch_time.png"), f"{title}: epoch time")
    sent = [steady_mean([r.get("bytes_max_rank", 0) for r in epochs]) / 2**20 for _, (epochs, _) in runs]
    bar_plot(plt, labels, sent, "MiB sent by the busiest rank per epoch", out("bytes.png"), f"{title}: bytes")
    written = ["loss.png", "accuracy.png", "epoch_time.png", "bytes.png"]
    if hit_rate_plot(plt, runs, out("cache_hit_rate.png"), f"{title}: prefetch cache"):
        written.append("cache_hit_rate.png")
    print(f"plot_metrics: wrote {', '.join(written)} to {args.output}")


if __name__ == "__main__":
    sys.exit(main())
