#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes ogb_suite.sh's SUMMARY.md from its results.csv.

  ogb_summary.py results.csv SUMMARY.md "COMMAND LINE"
"""
import csv
import os
import platform
import subprocess
import sys
import time


def machine():
    cores = os.cpu_count()
    memory = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(l for l in f if l.startswith("MemTotal:")).split()[1])
        memory = f", {kib / 2**20:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{platform.node()}: {cores} cores{memory}"


def commit():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def percent(value):
    return f"{100 * float(value):.2f}" if value else "—"


def expectation(row):
    if not row["expected"]:
        return "—"
    text = f"{percent(row['expected'])} ± {100 * float(row['spread']):.2f}"
    return text if row["judged"] == "yes" else f"ref {text}"


def mib(value):
    return f"{int(value) / 2**20:.1f}" if value else "—"


def main():
    csv_path, summary_path, command = sys.argv[1:4]
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    synthetic = any(r["data"] == "synthetic" for r in rows)
    lines = [f"# Tessera OGB suite — {time.strftime('%Y-%m-%d %H:%M')}", ""]
    if synthetic:
        lines += ["**SYNTHETIC STAND-INS**: the rows marked `synthetic` ran on contextual-SBM graphs of each "
                  "dataset's shape, not on the datasets; their accuracy says nothing about the real data.", ""]
    lines += [f"- command: `{command}`", f"- machine: {machine()}", f"- tessera: {commit()}",
              "- expected: the recipe's published number ± its spread; a run meets it when its test score (the "
              "metric column: accuracy, or ROC-AUC, F1, ... as the recipe's `metric`) is "
              "at least the number minus twice the spread (one point where no spread is published). `ref`: "
              "a number for a different model or training scheme, shown but not judged.", "",
              "| dataset | data | mode | grid | ranks | epochs | test % | expected % | meets | epoch ms | "
              "MiB sent / rank / epoch | peak MiB / rank | status | metric |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['data']} | {r['mode']} | {r['grid']} | {r['ranks']} | {r['epochs']} | "
                     f"{percent(r['test_acc'])} | {expectation(r)} | {r['meets'] or '—'} | {r['epoch_ms'] or '—'} | "
                     f"{mib(r['bytes_per_rank'])} | {r['peak_mib'] or '—'} | {r['status']} | {r.get('metric') or '—'} |")
    plots = os.path.join(os.path.dirname(summary_path), "plots")
    if os.path.isdir(plots):
        for dataset in sorted(os.listdir(plots)):
            lines += ["", f"## {dataset}", ""]
            for png in sorted(os.listdir(os.path.join(plots, dataset))):
                lines.append(f"![{dataset} {png[:-4]}](plots/{dataset}/{png})")
    with open(summary_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
