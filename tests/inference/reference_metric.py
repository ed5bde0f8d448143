#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""An independent reference for the metric `tessera predict` writes: the metric of each split, computed with
NumPy from the file's /probabilities and the graph file's labels and splits alone, against the file's root
attributes metric_train, metric_valid and metric_test.

Multi-label (a label matrix of 1, 0 and -1 unobserved): roc_auc and average_precision are per task over the
split's observed entries, averaged over the tasks with both classes (the OGB Evaluator's rule); ROC-AUC from
average ranks (the Mann-Whitney statistic), average precision as scikit-learn's (precision at each distinct
threshold times the recall it adds); f1_micro and f1_macro count an entry positive where its probability is
above 0.5 (macro: per task, over every task, 0 where a task has no positive and no predicted positive).
Single-label: accuracy, the share of labeled nodes whose most probable class is their label.

reference_metric.py GRAPH.h5 PREDICTIONS.h5 [CHECKPOINT.h5]: exit 0 when every written split's metric is
within 1e-4 of the reference (float32 probabilities can tie where the logits did not) and, with a checkpoint
whose best-validation parameters the file was made from, the validation value is within 1e-4 of the
checkpoint's best_valid (the training run's own score of the same parameters); else prints the difference,
exit 1.
"""
import sys

import h5py
import numpy as np

TOLERANCE = 1e-4


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def average_ranks(scores):
    """1-based ranks, tied scores sharing their mean rank."""
    values, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)
    return (last - (counts - 1) / 2.0)[inverse]


def roc_auc(scores, positive):
    p, n = positive.sum(), (~positive).sum()
    return (average_ranks(scores)[positive].sum() - p * (p + 1) / 2.0) / (p * n)


def average_precision(scores, positive):
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], positive[order]
    ends = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]  # the last entry of each distinct score
    tp = np.cumsum(y)[ends]
    precision, recall = tp / (ends + 1.0), tp / y.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def multi_label_metric(name, prob, labels):
    """The metric of rows `prob` against `labels` (1, 0, -1) of the same rows."""
    observed = labels >= 0
    if name in ("roc_auc", "average_precision"):
        score = roc_auc if name == "roc_auc" else average_precision
        values = []
        for t in range(labels.shape[1]):
            y = labels[observed[:, t], t] == 1
            if 0 < y.sum() < len(y):
                values.append(score(prob[observed[:, t], t], y))
        return float(np.mean(values)) if values else 0.0
    predicted = prob > 0.5
    tp = ((predicted & (labels == 1)) & observed).sum(axis=0)
    fp = ((predicted & (labels == 0)) & observed).sum(axis=0)
    fn = ((~predicted & (labels == 1)) & observed).sum(axis=0)
    if name == "f1_micro":
        d = 2 * tp.sum() + fp.sum() + fn.sum()
        return 2 * tp.sum() / d if d > 0 else 0.0
    d = 2 * tp + fp + fn
    return float(np.mean(np.where(d > 0, 2 * tp / np.maximum(d, 1), 0.0)))


def main(graph_path, predictions_path, checkpoint_path=None):
    with h5py.File(graph_path, "r") as g, h5py.File(predictions_path, "r") as out:
        name = text(out.attrs["metric"])
        valid = None
        if checkpoint_path and text(out.attrs["parameters"]) == "best":
            with h5py.File(checkpoint_path, "r") as ck:
                valid = float(ck.attrs["best_valid"])
        nodes, prob = out["nodes"][:], out["probabilities"][:].astype(np.float64)
        row_of = {v: k for k, v in enumerate(nodes)}
        labels = g["node/labels"][:]
        checked = []
        for split in ("train", "valid", "test"):
            key = "metric_" + split
            if key not in out.attrs or ("split/" + split) not in g:
                continue
            members = np.array([v for v in g["split/" + split][:] if v in row_of], dtype=np.int64)
            if len(members) < len(g["split/" + split]):
                continue  # predict wrote another split's nodes: this one's probabilities are not all here
            rows = np.array([row_of[v] for v in members], dtype=np.int64)
            if labels.ndim == 2:
                reference = multi_label_metric(name, prob[rows], labels[members])
            else:
                known = labels[members] >= 0
                reference = float(np.mean(prob[rows][known].argmax(axis=1) == labels[members][known]))
            got = float(out.attrs[key])
            if abs(got - reference) > TOLERANCE:
                print(f"FAILED: {name} on {split}: the file says {got:.6f}, the reference {reference:.6f}")
                return 1
            if split == "valid" and valid is not None and abs(reference - valid) > TOLERANCE:
                print(f"FAILED: {name} on valid: the reference {reference:.6f}, the training run {valid:.6f}")
                return 1
            checked.append(f"{split} {reference:.4f}")
        if not checked:
            print("FAILED: no split's metric to check"); return 1
        print(f"ok: {name} " + ", ".join(checked))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
