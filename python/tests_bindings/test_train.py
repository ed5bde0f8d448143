# SPDX-License-Identifier: BSD-3-Clause
"""tessera.train: the program's numbers for the same options, hooks that stop a run or raise on one rank, errors
as tessera.Error on every rank, node outputs as arrays in the program's order."""
import json
import os

import h5py
import numpy as np
import pytest

import tessera
from conftest import CLI, COMM, grid

# The options of run_tests.sh's reference run of the `tessera` program.
OPTIONS = dict(epochs=12, seed=3, dropout=0.5, weight_decay=5e-4, quiet=True)
COMPARED = ("epoch", "loss", "lr", "train_acc", "valid_acc", "test_acc", "valid_loss", "metric")


def program_history():
    with open(os.path.join(CLI, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["kind"] == "epoch"]


def test_train_gives_the_program_numbers(cora):
    r = tessera.train({"data": cora, "grid": grid() or None, **OPTIONS})
    expected = program_history()
    assert len(r.history) == len(expected) == 12
    for mine, theirs in zip(r.history, expected):
        assert {k: mine[k] for k in COMPARED} == {k: theirs[k] for k in COMPARED}
    assert r.best_epoch == max(expected, key=lambda e: (e["valid_acc"], -e["epoch"]))["epoch"]
    assert r.metric == "accuracy" and r.epochs_done == 12 and r.prefetch is None
    # Node outputs: this rank's block of node ids, as the program's files hold them.
    rows = len(r.predictions)
    assert r.embeddings.shape == (rows, 16) and r.embeddings.dtype == np.float32
    blocks = COMM.allgather((r.node_begin, rows))
    assert [b for b, _ in blocks] == list(np.cumsum([0] + [n for _, n in blocks])[:-1])
    assert sum(n for _, n in blocks) == 2708
    with h5py.File(os.path.join(CLI, "embeddings.h5"), "r") as f:
        np.testing.assert_array_equal(f["embeddings"][r.node_begin:r.node_begin + rows], r.embeddings)
    predicted = np.loadtxt(os.path.join(CLI, "predictions.txt"), dtype=np.int64)
    np.testing.assert_array_equal(predicted[r.node_begin:r.node_begin + rows], r.predictions)
    np.testing.assert_array_equal(r.node_ids, np.arange(r.node_begin, r.node_begin + rows))


def test_runs_on_a_communicator_of_mpi4py(cora):
    """The two halves of the world train at once, each on its own communicator (mpi4py's Split): the same
    options on the same grid give each half the same run."""
    half = COMM.Split(COMM.rank % 2 if COMM.size > 1 else 0, COMM.rank)
    grid = {1: None, 2: "1x1x2"}[half.size]
    r = tessera.train(data=cora, grid=grid, epochs=3, quiet=True, comm=half, keep_outputs=False)
    runs = COMM.allgather([(e["loss"], e["valid_acc"]) for e in r.history])
    assert len(runs[0]) == 3 and all(run == runs[0] for run in runs)
    half.Free()


def test_toml_file_with_overrides(cora, shared_dir):
    path = os.path.join(shared_dir, "run.toml")
    if COMM.rank == 0:
        with open(path, "w") as f:
            f.write(f'data = "{cora}"\nepochs = 7\nhidden = 8\nquiet = true\n')
    COMM.barrier()
    r = tessera.train(path, epochs=2, keep_outputs=False)
    assert [e["epoch"] for e in r.history] == [1, 2] and r.predictions is None
    assert tessera.train(path, print_config=True) is None


def test_a_hook_stops_the_run(cora):
    seen = []

    def stop_after_three(record):  # only rank 0 says stop: every rank stops
        seen.append(record["epoch"])
        return not (COMM.rank == 0 and record["epoch"] == 3)

    class Steps:
        def __init__(self):
            self.epochs = 0

        def on_epoch(self, record):
            self.epochs += 1

    steps = Steps()
    hooks = [stop_after_three, steps] if COMM.rank == 0 else [steps]  # ranks may differ in their hooks
    r = tessera.train(data=cora, epochs=10, quiet=True, hooks=hooks, keep_outputs=False)
    assert seen == ([1, 2, 3] if COMM.rank == 0 else []) and steps.epochs == 3
    assert len(r.history) == 3 and r.epochs_done == 3


def test_sampled_mode_reports_steps(cora):
    class Steps:
        def __init__(self):
            self.steps, self.epochs = [], 0

        def on_step(self, record):
            self.steps.append((record["epoch"], record["step"]))

        def on_epoch(self, record):
            self.epochs += 1

    seen = Steps()
    r = tessera.train(data=cora, mode="sampled", partition="block", epochs=2, batch_size=256, fanouts=[5, 5],
                      quiet=True, hooks=[seen] if COMM.rank == COMM.size - 1 else [])  # one rank's hook only
    assert len(r.history) == 2
    if COMM.rank == COMM.size - 1:
        assert seen.epochs == 2 and seen.steps[0] == (1, 1) and seen.steps[-1][0] == 2
    assert r.prefetch is not None and set(r.prefetch) >= {"remote_rows", "cache_hits"}
    assert r.embeddings.shape == (len(r.predictions), 16)


def test_sampled_mode_keeps_features_in_bf16(cora):
    """feature_dtype="bf16" halves the cache's bytes a row: a cache of the same size holds twice the rows."""
    common = dict(data=cora, mode="sampled", partition="block", epochs=1, batch_size=256, fanouts=[5, 5],
                  cache_size=str(4 * 1433 * 4), quiet=True)  # 4 of Cora's fp32 rows a rank
    f32 = tessera.train(**common)
    bf16 = tessera.train(feature_dtype="bf16", **common)
    assert bf16.prefetch["cache_bytes"] == f32.prefetch["cache_bytes"]
    if COMM.size > 1:
        assert bf16.prefetch["cache_rows"] == 2 * f32.prefetch["cache_rows"] > 0
        assert 0 < bf16.prefetch["fetched_bytes"] < f32.prefetch["fetched_bytes"]


def test_a_signal_stops_every_rank_with_a_checkpoint(cora, shared_dir):
    """What a batch job's time limit does (Slurm's --signal=USR1@...): every rank stops at the epoch's end and
    the checkpoint holds it; a second call resumes the run."""
    import signal

    def signal_at_two(record):
        if COMM.rank == 0 and record["epoch"] == 2:
            os.kill(os.getpid(), signal.SIGUSR1)

    options = dict(data=cora, epochs=6, quiet=True, checkpoint=os.path.join(shared_dir, "ck"))
    r = tessera.train(options, hooks=[signal_at_two], keep_outputs=False)
    assert r.stop_signal == signal.SIGUSR1 and r.epochs_done == 2
    resumed = tessera.train(options, resume=True, keep_outputs=False)
    assert resumed.stop_signal == 0 and resumed.epochs_done == 6
    assert [e["epoch"] for e in resumed.history] == [3, 4, 5, 6]


def test_a_hook_raising_on_one_rank_raises_on_every_rank(cora, capsys):
    last = COMM.size - 1

    def boom(record):
        if COMM.rank == last and record["epoch"] == 2:
            raise ValueError("boom")

    with pytest.raises(tessera.Error, match=f"rank {last} after epoch 2: ValueError: boom"):
        tessera.train(data=cora, epochs=5, quiet=True, hooks=[boom])
    err = capsys.readouterr().err
    if COMM.rank == last:  # the raising rank printed the traceback
        assert "Traceback" in err and 'raise ValueError("boom")' in err, err
    COMM.barrier()  # every rank got here


def test_bad_options_and_files_raise_on_every_rank(cora, shared_dir):
    with pytest.raises(tessera.Error, match="--epoch.*--epochs"):
        tessera.train(data=cora, epoch=3)
    with pytest.raises(tessera.Error, match="--lr must be"):
        tessera.train(data=cora, lr=-1)
    missing = os.path.join(shared_dir, "missing.h5")
    with pytest.raises(tessera.Error, match="missing.h5"):
        tessera.train(data=missing)
    with pytest.raises(tessera.Error, match="--save-embeddings .*names the input"):
        tessera.train(data=cora, save_embeddings=cora)
    with pytest.raises(tessera.Error, match="missing.toml: cannot read the configuration file"):
        tessera.train(os.path.join(shared_dir, "missing.toml"))
    with pytest.raises(TypeError):
        tessera.train(42)


def test_one_hdf5_in_the_process(cora, shared_dir):
    """h5py (the MPI build the package selects) and the bindings read and write the same files."""
    assert h5py.get_config().mpi
    path = os.path.join(shared_dir, "small.h5")
    if COMM.rank == 0:
        rng = np.random.default_rng(1)
        edges = rng.integers(0, 40, size=(2, 120))
        tessera.write_graph(path, edges, rng.random((40, 5), dtype=np.float32), rng.integers(0, 3, 40),
                            train=np.arange(20), valid=np.arange(20, 30), test=np.arange(30, 40), symmetrize=True)
    COMM.barrier()
    out = os.path.join(shared_dir, "emb.h5")
    r = tessera.train(data=path, epochs=2, hidden=4, quiet=True, save_embeddings=out)
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["embeddings"][r.node_begin:r.node_begin + len(r.predictions)],
                                      r.embeddings)


def test_a_serial_h5py_first_is_refused(shared_dir):
    """A process that imported Debian's serial h5py before tessera must not load the parallel HDF5 as well."""
    import subprocess
    import sys
    stderr = None
    if COMM.rank == 0:  # a fresh interpreter, outside MPI
        env = {k: v for k, v in os.environ.items()
               if k != "H5PY_ALWAYS_USE_MPI" and not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
        env["PYTHONPATH"] = os.environ["TESSERA_PYTHONPATH"]
        script = "import h5py, tessera\ntessera.train(data='none.h5')"
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=shared_dir)
        stderr = r.stderr if r.returncode != 0 else "exit 0"
    stderr = COMM.bcast(stderr)  # every rank judges rank 0's run: no rank leaves the others behind
    assert "ImportError: h5py was imported with the serial HDF5" in stderr, stderr



def test_a_multi_label_graph_trains_and_scores_its_metric(shared_dir):
    """A label matrix written from Python trains in the chosen metric, the same on a grid as on one rank (the
    program's own run); the run keeps embeddings, no class per node."""
    path = os.path.join(shared_dir, "tasks.h5")
    if COMM.rank == 0:
        rng = np.random.default_rng(2)
        n, blocks = 120, np.arange(120) % 3
        x = rng.normal(size=(n, 6)) + 0.8 * np.eye(3)[blocks] @ rng.normal(size=(3, 6))
        y = (rng.random((n, 4)) < np.where(rng.random((3, 4)) < 0.5, 0.85, 0.15)[blocks]).astype(np.int64)
        y[rng.random((n, 4)) < 0.1] = -1
        same = blocks[:, None] == blocks[None, :]
        u, v = np.nonzero(np.triu(rng.random((n, n)) < np.where(same, 0.08, 0.01), 1))
        order = rng.permutation(n)
        tessera.write_graph(path, np.vstack([u, v]), x, y, train=order[:60], valid=order[60:90],
                            test=order[90:], symmetrize=True)
    COMM.barrier()
    options = dict(data=path, epochs=15, metric="f1-micro", pos_weight=[2], quiet=True)
    r = tessera.train({**options, "grid": grid() or None})
    assert r.metric == "f1_micro" and r.predictions is None and r.embeddings.shape[1] == 16
    if COMM.rank == 0:
        alone = tessera.train(options, comm=COMM.Split(COMM.rank, 0) if COMM.size > 1 else None)
    else:
        COMM.Split(1, 0)
        alone = None
    alone = COMM.bcast(alone.history if alone else None)
    assert [e["loss"] for e in r.history] == pytest.approx([e["loss"] for e in alone], rel=1e-5)
    assert 0 < r.best_valid <= 1


def test_a_link_task_trains_and_scores_its_pairs(shared_dir):
    """A link split written from Python trains a link task (a GAE-style encoder) on a grid and in sampled mode;
    the embeddings a run keeps are its output, and the test pairs' ROC-AUC NumPy computes from them is the run's
    test score."""
    path = os.path.join(shared_dir, "links.h5")
    if COMM.rank == 0:
        rng = np.random.default_rng(4)
        n, blocks = 150, np.arange(150) % 3
        x = rng.normal(size=(n, 8)) + np.eye(3)[blocks] @ rng.normal(size=(3, 8))
        same = blocks[:, None] == blocks[None, :]
        u, v = np.nonzero(np.triu(rng.random((n, n)) < np.where(same, 0.12, 0.004), 1))
        graph = tessera.Graph(np.vstack([u, v]), x, None, {})
        rest, links = tessera.random_link_split(graph, valid=0.1, test=0.1, seed=1)
        tessera.write_graph(path, rest.edge_index, x, None, link_splits=links, symmetrize=True)
    COMM.barrier()
    r = tessera.train(data=path, epochs=40, eval_every=5, hidden=16, embedding_dim=8, dropout=0, quiet=True,
                      grid=grid() or None)
    assert r.metric == "roc_auc" and r.predictions is None and r.embeddings.shape[1] == 8
    z = np.concatenate(COMM.allgather(r.embeddings))
    with h5py.File(path, "r") as f:
        pos, neg = f["link/test/edges"][:], f["link/test/negatives"][:]
    s_pos, s_neg = ((z[p[:, 0]] * z[p[:, 1]]).sum(1) for p in (pos, neg))
    auc = ((s_pos[:, None] > s_neg[None, :]).mean() + 0.5 * (s_pos[:, None] == s_neg[None, :]).mean())
    assert auc == pytest.approx(r.test_at_best, abs=1e-5)
    assert r.test_at_best > 0.8
    # The sampled mode: its embeddings (exact, layer-wise) give its test score too.
    s = tessera.train(data=path, mode="sampled", epochs=40, eval_every=5, hidden=16, embedding_dim=8, dropout=0,
                      batch_size=256, fanouts=[5, 5], quiet=True)
    z = np.concatenate(COMM.allgather(s.embeddings))
    s_pos, s_neg = ((z[p[:, 0]] * z[p[:, 1]]).sum(1) for p in (pos, neg))
    auc = ((s_pos[:, None] > s_neg[None, :]).mean() + 0.5 * (s_pos[:, None] == s_neg[None, :]).mean())
    assert s.metric == "roc_auc" and auc == pytest.approx(s.test_at_best, abs=1e-5)
    assert s.test_at_best > 0.8
    # The MLP decoder, its parameters trained with the model's, scores the pairs as well.
    m = tessera.train(data=path, epochs=40, eval_every=5, hidden=16, embedding_dim=8, dropout=0, quiet=True,
                      link_decoder="mlp", link_decoder_hidden=16, grid=grid() or None)
    assert m.metric == "roc_auc" and m.test_at_best > 0.8
