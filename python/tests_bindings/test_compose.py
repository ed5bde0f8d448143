# SPDX-License-Identifier: BSD-3-Clause
"""Composing from Python: a graph handed over as this rank's arrays trains exactly as the same graph read from
its file; the library's layers, losses and schedules; refusals on every rank."""
import os

import h5py
import numpy as np
import pytest

import tessera
from conftest import COMM, grid


def rows_of(begins, n):
    """This rank's rows when rank r holds [begins[r], begins[r + 1])."""
    return begins[COMM.rank], (begins[COMM.rank + 1] if COMM.rank + 1 < COMM.size else n)


def file_arrays(path, begin, end):
    """Rows [begin, end) of a graph file, as an application would hold them: CSR of in-neighbours, features,
    labels and masks."""
    with h5py.File(path, "r") as f:
        indptr = f["graph/indptr"][begin:end + 1]
        indices = f["graph/indices"][indptr[0]:indptr[-1]]
        x = f["node/features"][begin:end]
        y = f["node/labels"][begin:end]
        masks = {s: np.isin(np.arange(begin, end), f[f"split/{s}"][:]) for s in ("train", "valid", "test")}
        return indptr - indptr[0], indices, x, y, masks, int(f.attrs["num_nodes"]), int(f.attrs["num_classes"])


@pytest.fixture
def generated(shared_dir):
    """A 97-node graph with 3 classes written by write_graph (rank 0)."""
    path = os.path.join(shared_dir, "generated.h5")
    if COMM.rank == 0:
        rng = np.random.default_rng(7)
        y = rng.integers(0, 3, 97)
        x = (rng.random((97, 6)) + 0.5 * y[:, None]).astype(np.float32)
        edges = rng.integers(0, 97, size=(2, 300))
        order = rng.permutation(97)
        tessera.write_graph(path, edges, x, y, train=order[:40], valid=order[40:70], test=order[70:],
                            symmetrize=True, name="generated")
    COMM.barrier()
    return path


MODEL = [tessera.Dropout(0.2), tessera.SageConv(8, relu=True, dropout=0.3), tessera.SageConv(3)]


@pytest.mark.parametrize("first_rank_empty", [False, True])
def test_arrays_train_as_the_file(generated, first_rank_empty):
    n = 97
    # Rank 0 holds no rows where asked (an empty block), the others split the rest unevenly.
    begins = [0] * COMM.size
    for r in range(1 if first_rank_empty and COMM.size > 1 else 0, COMM.size):
        begins[r] = (n * r * r) // (COMM.size * COMM.size)
    begin, end = rows_of(begins, n)
    indptr, indices, x, y, masks, nodes, classes = file_arrays(generated, begin, end)
    options = dict(grid=grid(), normalization="mean", normalize_features=True, seed=5)
    from_arrays = tessera.graph_from_arrays(indptr, indices, x, y, masks, first_row=begin, num_nodes=nodes,
                                            **options)
    from_file = tessera.load_graph(generated, **options)
    assert (from_arrays.num_nodes, from_arrays.num_features, from_arrays.num_classes) == (97, 6, classes)
    assert from_arrays.grid == from_file.grid
    results = [tessera.fit(tessera.Sequential(MODEL, seed=11), g, epochs=6, lr=0.02, weight_decay=5e-4)
               for g in (from_arrays, from_file)]
    keys = ("loss", "train_acc", "valid_acc", "test_acc", "valid_loss")
    assert [[e[k] for k in keys] for e in results[0].history] == [[e[k] for k in keys] for e in results[1].history]
    np.testing.assert_array_equal(results[0].embeddings, results[1].embeddings)
    np.testing.assert_array_equal(results[0].predictions, results[1].predictions)
    assert results[0].embeddings.shape == (len(results[0].predictions), 8)
    for g in (from_arrays, from_file):
        g.release()
    with pytest.raises(ValueError, match="released"):
        from_file.num_nodes


def test_scipy_rows_losses_and_schedules(generated):
    import scipy.sparse as sp
    n = 97
    begin, end = rows_of([n * r // COMM.size for r in range(COMM.size)], n)
    indptr, indices, x, y, masks, nodes, _ = file_arrays(generated, begin, end)
    block = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(end - begin, n))
    index_masks = {s: np.flatnonzero(m) for s, m in masks.items()}  # row indices stand for masks too
    g = tessera.graph_from_arrays(block, None, x, y, index_masks, first_row=begin, num_nodes=nodes, grid=grid())
    model = tessera.Sequential(seed=2).add(tessera.GcnConv(8, relu=True)).add(tessera.GcnConv(3))
    r = tessera.fit(model, g, epochs=8, lr=0.05, lr_schedule="cosine", lr_min=0.005, lr_warmup=2)
    lrs = [e["lr"] for e in r.history]
    assert lrs[0] < lrs[1] and lrs[-1] < lrs[2] and r.metric == "accuracy"
    # Binary cross-entropy: one logit per node, labels 0/1, scored by ROC-AUC.
    binary = tessera.graph_from_arrays(block, None, x, (y > 0).astype(np.int64), index_masks, first_row=begin,
                                       num_nodes=nodes, num_classes=2, grid=grid())
    model = tessera.Sequential([tessera.GcnConv(8, relu=True), tessera.BatchNorm(), tessera.GcnConv(1)], seed=2)
    r = tessera.fit(model, binary, epochs=5, loss="binary_cross_entropy", keep_outputs=False)
    assert r.metric == "roc_auc" and all(0 <= e["valid_acc"] <= 1 for e in r.history)


def test_refusals_on_every_rank(generated):
    n = 97
    begin, end = rows_of([n * r // COMM.size for r in range(COMM.size)], n)
    indptr, indices, x, y, masks, nodes, _ = file_arrays(generated, begin, end)
    bad = y.copy()
    if COMM.rank == COMM.size - 1:
        bad[-1] = 9  # past num_classes on one rank only
    with pytest.raises(tessera.Error, match="my rows.*label"):
        tessera.graph_from_arrays(indptr, indices, x, bad, masks, first_row=begin, num_nodes=nodes, num_classes=3,
                                  name="my rows", grid=grid())
    last = COMM.rank == COMM.size - 1  # arrays wrong on one rank only: every rank raises
    with pytest.raises(tessera.Error, match=f"my rows: rank {COMM.size - 1}: features must be 2-D"):
        tessera.graph_from_arrays(indptr, indices, x.reshape(-1) if last else x, y, masks, first_row=begin,
                                  num_nodes=nodes, name="my rows", grid=grid())
    short = {**masks, "valid": masks["valid"][:-1]} if last else masks
    with pytest.raises(tessera.Error, match=f"rank {COMM.size - 1}: split 'valid': [0-9]+ entries for"):
        tessera.graph_from_arrays(indptr, indices, x, y, short, first_row=begin, num_nodes=nodes, grid=grid())
    g = tessera.graph_from_arrays(indptr, indices, x, y, masks, first_row=begin, num_nodes=nodes, grid=grid())
    with pytest.raises(tessera.Error, match="gcn|symmetric|mean"):  # GCN layers on a mean-weighted graph
        mean = tessera.graph_from_arrays(indptr, indices, x, y, masks, first_row=begin, num_nodes=nodes,
                                         normalization="mean", grid=grid())
        tessera.fit(tessera.Sequential([tessera.GcnConv(3)]), mean)
    with pytest.raises(tessera.Error, match="loss must be"):
        tessera.fit(tessera.Sequential([tessera.GcnConv(3)]), g, loss="hinge")
    # Library errors name the option as fit() takes it (the program's own messages name its flags).
    for bad, message in ((dict(weight_decay=-1), "^weight_decay must be finite and not negative"),
                         (dict(lr=-1), "^lr must be finite and not negative"),
                         (dict(epochs=0), "^epochs must be at least 1"),
                         (dict(lr_schedule="linear"), "^lr_schedule must be constant, step or cosine")):
        with pytest.raises(tessera.Error, match=message):
            tessera.fit(tessera.Sequential([tessera.GcnConv(3)]), g, **bad)
    for layer, message in ((tessera.GcnConv(4, dropout=-0.5), r"dropout must be in \[0, 1\), not -0.5"),
                           (tessera.Dropout(1.5), r"dropout must be in \[0, 1\), not 1.5"),
                           (tessera.GcnConv(0), "the output width must be at least 1")):
        with pytest.raises(tessera.Error, match=message):
            tessera.fit(tessera.Sequential([layer, tessera.GcnConv(3)]), g)
    with pytest.raises(tessera.Error, match="grid"):
        tessera.load_graph(generated, grid="2x2")
    if COMM.size > 1:
        with pytest.raises(tessera.Error, match="name the 3D grid of these"):
            tessera.load_graph(generated)


def test_fit_defaults_are_the_programs():
    """fit()'s defaults are read off the C++ structs: the same as `tessera train --print-config` writes."""
    import subprocess
    program = os.environ.get("TESSERA")
    if not program:
        pytest.skip("TESSERA is not set")
    # A program of its own, outside this MPI job (its variables would make it join it).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
    config = subprocess.run([program, "train", "--data", "x.h5", "--print-config"], capture_output=True, text=True,
                            check=True, env=env).stdout
    written = dict(line.split("=", 1) for line in config.splitlines() if "=" in line and not line.startswith("#"))
    defaults = tessera.fit_defaults()
    for key, option in (("epochs", "epochs"), ("lr", "lr"), ("weight_decay", "weight-decay"),
                        ("eval_every", "eval-every"), ("clip_grad_norm", "clip-grad-norm"),
                        ("lr_warmup", "lr-warmup"), ("lr_step_every", "lr-step-every"), ("lr_gamma", "lr-gamma"),
                        ("lr_min", "lr-min")):
        assert float(written[option]) == pytest.approx(float(defaults[key])), key
    assert written["lr-schedule"] == f'"{defaults["lr_schedule"]}"'


def test_fit_trains_a_multi_label_graph_as_the_program(shared_dir, generated):
    """A multi-label graph read from its file: fit's loss auto is the per-task binary cross-entropy, scored by
    the metric asked for, and trains as `tessera train` does with the same options; what does not fit the
    graph's task is refused on every rank."""
    path = os.path.join(shared_dir, "compose_tasks.h5")
    if COMM.rank == 0:
        rng = np.random.default_rng(4)
        n, blocks = 90, np.arange(90) % 3
        x = rng.normal(size=(n, 5)) + np.eye(3)[blocks] @ rng.normal(size=(3, 5))
        y = (rng.random((n, 4)) < np.where(rng.random((3, 4)) < 0.5, 0.8, 0.2)[blocks]).astype(np.int64)
        y[rng.random((n, 4)) < 0.1] = -1
        edges = rng.integers(0, n, size=(2, 300))
        order = rng.permutation(n)
        tessera.write_graph(path, edges, x, y, train=order[:45], valid=order[45:70], test=order[70:],
                            symmetrize=True)
    COMM.barrier()
    g = tessera.load_graph(path, grid=grid(), seed=5)
    model = tessera.Sequential([tessera.GcnConv(8, relu=True, dropout=0.3), tessera.GcnConv(4)], seed=11)
    composed = tessera.fit(model, g, epochs=6, lr=0.02, metric="ap", pos_weight=2)
    assert composed.metric == "average_precision" and composed.predictions is None
    with pytest.raises(tessera.Error, match="loss cross_entropy scores one class per node"):
        tessera.fit(tessera.Sequential([tessera.GcnConv(4)]), g, loss="cross_entropy")
    with pytest.raises(tessera.Error, match="pos_weight gives 3 weights for 4 tasks"):
        tessera.fit(tessera.Sequential([tessera.GcnConv(4)]), g, pos_weight=[1, 2, 3])
    g.release()
    program = tessera.train(data=path, grid=grid(), permute="double", seed=11, hidden=8, dropout=0.3,
                            input_dropout=0, epochs=6, lr=0.02, metric="ap", pos_weight=[2], quiet=True)
    assert [e["loss"] for e in composed.history] == pytest.approx([e["loss"] for e in program.history], rel=1e-6)
    assert composed.best_valid == pytest.approx(program.best_valid, abs=1e-6) and 0 < composed.best_valid <= 1
    single = tessera.load_graph(generated, grid=grid())
    with pytest.raises(tessera.Error, match="metric rocauc scores a multi-label task"):
        tessera.fit(tessera.Sequential([tessera.GcnConv(3)]), single, metric="rocauc")
    single.release()


def test_composed_gat_is_the_programs_gat(generated):
    """GatConv layers composed in Python train as `tessera train --model gat` does: the same initial weights
    (keyed by the seed and the layer), losses and outputs."""
    g = tessera.load_graph(generated, grid=grid(), normalization="symmetric", seed=5)
    model = tessera.Sequential([tessera.Dropout(0.2),
                                tessera.GatConv(4, heads=3, activation="elu", attention_dropout=0.3, dropout=0.2),
                                tessera.GatConv(3, heads=2, concat=False, attention_dropout=0.3)], seed=11)
    composed = tessera.fit(model, g, epochs=5, lr=0.02, weight_decay=5e-4)
    g.release()
    program = tessera.train(data=generated, grid=grid(), permute="double", seed=11, model="gat", hidden=4, heads=3,
                            output_heads=2, dropout=0.2, input_dropout=0.2, attention_dropout=0.3, epochs=5,
                            lr=0.02, weight_decay=5e-4, quiet=True)
    assert [e["loss"] for e in composed.history] == pytest.approx([e["loss"] for e in program.history], rel=1e-6)
    assert composed.history[-1]["loss"] < composed.history[0]["loss"]
    np.testing.assert_allclose(composed.embeddings, program.embeddings, rtol=1e-5, atol=1e-6)
    with pytest.raises(tessera.Error, match="activation must be None, none, relu or elu, not 'tanh'"):
        tessera.fit(tessera.Sequential([tessera.GatConv(3, activation="tanh")]),
                    tessera.load_graph(generated, grid=grid(), normalization="symmetric"), epochs=1)
