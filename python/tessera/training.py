# SPDX-License-Identifier: BSD-3-Clause
"""`tessera.train`: the `tessera train` program as a function, with Python hooks and the result as Python
objects (a list of epoch dicts, NumPy arrays of node outputs)."""
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from ._runtime import bindings


@dataclass
class TrainResult:
    """What a run returns, on every rank.

    history: one dict per epoch this call ran, with the metrics file's keys (epoch, loss, lr, train_acc,
    valid_acc, test_acc, valid_loss, metric where evaluated, epoch_s, ...). predictions and embeddings (where
    kept) cover this rank's block of node ids, node_begin on, in the graph file's node order; a multi-label
    graph's run keeps no predictions (None)."""
    history: List[Dict[str, Any]]
    best_epoch: int
    best_valid: float
    test_at_best: float
    epochs_done: int
    metric: str
    peak_bytes: int
    stop_signal: int
    prefetch: Optional[Dict[str, int]] = None
    node_begin: int = 0
    predictions: Optional[np.ndarray] = None
    embeddings: Optional[np.ndarray] = None

    @property
    def node_ids(self):
        """The node id of each row of predictions and embeddings."""
        rows = len(self.predictions) if self.predictions is not None else \
            len(self.embeddings) if self.embeddings is not None else 0
        return np.arange(self.node_begin, self.node_begin + rows, dtype=np.int64)


def _result(raw):
    prefetch = raw.get("prefetch")
    return TrainResult(history=json.loads(raw["history"]), best_epoch=raw["best_epoch"],
                       best_valid=raw["best_valid"], test_at_best=raw["test_at_best"],
                       epochs_done=raw["epochs_done"], metric=raw["metric"], peak_bytes=raw["peak_bytes"],
                       stop_signal=raw["stop_signal"], prefetch=json.loads(prefetch) if prefetch else None,
                       node_begin=raw.get("node_begin", 0), predictions=raw.get("predictions"),
                       embeddings=raw.get("embeddings"))


def _hook_calls(hooks):
    """The hooks as the two callables the library calls with JSON text: a callable is an epoch hook; an object
    may have on_epoch(record) and on_step(record). An epoch hook returning False stops the run."""
    epoch_hooks, step_hooks = [], []
    for hook in hooks:
        if hasattr(hook, "on_epoch") or hasattr(hook, "on_step"):
            if hasattr(hook, "on_epoch"):
                epoch_hooks.append(hook.on_epoch)
            if hasattr(hook, "on_step"):
                step_hooks.append(hook.on_step)
        elif callable(hook):
            epoch_hooks.append(hook)
        else:
            raise TypeError(f"a hook must be callable or have on_epoch/on_step, not {type(hook).__name__}")

    def on_epoch(text):
        record = json.loads(text)
        go = True
        for hook in epoch_hooks:
            go = (hook(record) is not False) and go
        return go

    def on_step(text):
        record = json.loads(text)
        for hook in step_hooks:
            hook(record)

    return (on_epoch if epoch_hooks else None), (on_step if step_hooks else None)


def _option_words(options: Dict[str, Any]) -> List[str]:
    """{"epochs": 3, "normalize_features": True, "fanouts": [5, 10]} -> --epochs 3 --normalize-features
    --fanouts 5,10: the command line `tessera train` parses (a False flag or None is left out)."""
    words = []
    for key, value in options.items():
        flag = "--" + str(key).replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, (list, tuple)):
            words += [flag, ",".join(str(v) for v in value)]
        else:
            words += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return words


def train(config=None, *, comm=None, hooks=(), keep_outputs: bool = True, **options) -> Optional[TrainResult]:
    """Trains as `tessera train` does, on every rank of `comm` (an mpi4py communicator; default COMM_WORLD).

    config: a dict of `tessera train` options (keys as in a --config TOML file: long option names without
    dashes, '_' or '-'), or the path of such a TOML file; keyword options override it. hooks: callables called
    with each epoch's record (a dict) on every rank, returning False to stop (every rank stops after that epoch),
    or objects with on_epoch(record) / on_step(record). keep_outputs: return every node's prediction and
    embedding as arrays (TrainResult.predictions / embeddings, this rank's block of node ids).

    Raises tessera.Error on every rank for bad options or data (one line naming the option or file), and when a
    hook raises on any rank. Returns None where the options asked for help or print_config."""
    words, given = [], {}
    if isinstance(config, (str, os.PathLike)):
        words += ["--config", os.fspath(config)]
    elif isinstance(config, dict):
        given.update({str(k).replace("-", "_"): v for k, v in config.items()})
    elif config is not None:
        raise TypeError(f"config must be a dict or a TOML file's path, not {type(config).__name__}")
    given.update(options)
    words += _option_words(given)
    on_epoch, on_step = _hook_calls(hooks)
    raw = bindings().train(words, comm, on_epoch, on_step, keep_outputs)
    return None if raw is None else _result(raw)
