#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# predict_cases.sh CASE: tests of `tessera predict` and of the sampled mode's exact outputs. Environment as
# tests/cli/cases.sh (TESSERA, MPIEXEC, SOURCE_DIR). Exit 0 = pass, 77 = skipped, else failure.
set -u
case_name=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/tessera-predict-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
expect_error() { bash "$SOURCE_DIR/tests/cli/expect_error.sh" "$@" || exit 1; }
mpi() { $MPIEXEC -n "$@"; }
py=python3; $py -c 'import h5py, numpy' 2>/dev/null || py=/usr/bin/python3
reference() { $py "$here/reference_forward.py" "$@" || { echo "FAILED: $*"; exit 1; }; }
# A small graph with communities, four partitions of every method, and checkpoints of the three modes.
setup() {
  "$TESSERA" prep synth --kind csbm --nodes 600 --edges 3000 --features 12 --classes 4 --seed 3 -o g.h5 >/dev/null || exit 1
  for parts in 2 4 8; do
    for method in metis random; do
      "$TESSERA" partition --data g.h5 --parts $parts --method $method --name $method-$parts >/dev/null || exit 1
    done
  done
  "$TESSERA" train --data g.h5 --layers 3 --hidden 8 --epochs 6 --checkpoint full --quiet >/dev/null || exit 1
  mpi 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 2x1x1x1 --batch-size 0.3 --model sage --hidden 8 \
    --epochs 4 --checkpoint mini --quiet >/dev/null || exit 1
  mpi 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2 --hidden 8 --layers 3 --epochs 4 \
    --checkpoint sampled --eval-every 0 --quiet >/dev/null || exit 1
}

case "$case_name" in
  predict_every_mode)
    $py -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: no python3-h5py / numpy"; exit 77; }
    setup
    # Each mode's checkpoint on one rank (full engine) against the dense reference, every output.
    for ck in full mini sampled; do
      "$TESSERA" predict --checkpoint $ck --data g.h5 --output $ck-1.h5 --probabilities --embeddings \
        --engine full --quiet >/dev/null || exit 1
      reference g.h5 $ck/checkpoint.h5 $ck-1.h5
    done
    # Layer-wise on 2, 4 and 8 ranks over every partition method, and full on grids of 2, 4 and 8 ranks.
    for ranks in 2 4 8; do
      for partition in metis-$ranks random-$ranks block; do
        mpi $ranks "$TESSERA" predict --checkpoint sampled --data g.h5 --output s.h5 --probabilities \
          --embeddings --embeddings-layer 1 --partition $partition --quiet >/dev/null || exit 1
        reference g.h5 sampled/checkpoint.h5 s.h5
      done
    done
    for grid in 1x2x1 2x1x2 2x2x2; do
      ranks=$(( $(tr x '*' <<<"$grid") ))
      mpi $ranks "$TESSERA" predict --checkpoint mini --data g.h5 --output m.h5 --embeddings --grid $grid \
        --nodes valid --csv m.csv --quiet >/dev/null || exit 1
      reference g.h5 mini/checkpoint.h5 m.h5
      # The CSV holds the same nodes and classes as the HDF5 file.
      $py - m.h5 m.csv <<'PY' || exit 1
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
csv = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1, dtype=np.int64).reshape(-1, 2)
assert np.array_equal(csv[:, 0], f["nodes"][:]) and np.array_equal(csv[:, 1], f["predictions"][:]), "csv differs"
PY
    done
    # Nine nodes on 8 ranks: one-row parts (layer-wise, block) and a 2x2x2 grid of nearly empty blocks.
    "$TESSERA" prep synth --kind csbm --nodes 9 --edges 16 --features 3 --classes 2 --seed 2 -o tiny.h5 >/dev/null || exit 1
    "$TESSERA" train --data tiny.h5 --epochs 2 --checkpoint tiny --quiet >/dev/null || exit 1
    for engine in "--engine layerwise" "--grid 2x2x2"; do
      mpi 8 "$TESSERA" predict --checkpoint tiny --data tiny.h5 --output t.h5 --probabilities --embeddings $engine \
        --quiet >/dev/null || exit 1
      reference tiny.h5 tiny/checkpoint.h5 t.h5
    done
    # A multigraph (repeated edges, self loops; not symmetrized): GraphSAGE through both engines.
    $py "$SOURCE_DIR/tests/fixtures/make_ogb_fixture.py" ogb >/dev/null || exit 1
    "$TESSERA" prep ogb ogb -o multi.h5 >/dev/null || exit 1
    "$TESSERA" train --data multi.h5 --model sage --epochs 3 --checkpoint multi --quiet >/dev/null || exit 1
    for engine in full layerwise; do
      mpi 2 "$TESSERA" predict --checkpoint multi --data multi.h5 --output u.h5 --probabilities --engine $engine \
        --quiet >/dev/null || exit 1
      reference multi.h5 multi/checkpoint.h5 u.h5
    done
    # The accuracy it prints is the training run's own evaluation of the same parameters.
    out=$("$TESSERA" predict --checkpoint full --data g.h5 --csv p.csv) || exit 1
    echo "$out"
    best=$("$TESSERA" train --data g.h5 --layers 3 --hidden 8 --epochs 6 --quiet | tail -n 1)
    valid=$(sed -E 's/.*best valid ([0-9.]+) at epoch ([0-9]+): test ([0-9.]+).*/valid \1 test \3/' <<<"$best")
    grep -qF "$valid" <<<"$out" || { echo "FAILED: predict did not say '$valid' ($best)"; exit 1; }
    head -n 1 <<<"$out" | grep -qE "best-validation parameters of epoch [0-9]+" || exit 1
    out=$("$TESSERA" predict --checkpoint sampled --data g.h5 --csv q.csv) || exit 1
    head -n 1 <<<"$out" |
      grep -q "final parameters of epoch 4 (the checkpoint holds no best-validation parameters)" || exit 1 ;;
  sampled_exact_outputs)
    $py -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: no python3-h5py / numpy"; exit 77; }
    setup
    # Sampled training's outputs and final evaluation are exact: those of predict on the same checkpoint.
    out=$(mpi 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2 --hidden 8 --layers 3 --epochs 4 \
      --checkpoint s2 --save-predictions t.txt --save-embeddings t.h5) || exit 1
    echo "$out"
    line=$(grep "exact evaluation of epoch" <<<"$out") || { echo "FAILED: no exact evaluation line"; exit 1; }
    pred=$(mpi 4 "$TESSERA" predict --checkpoint s2 --data g.h5 --output p.h5 --embeddings --partition random-4) || exit 1
    want=$(sed -E 's/.*: (train [0-9.]+ valid [0-9.]+ test [0-9.]+)$/\1/' <<<"$line")
    grep -qF "accuracy $want" <<<"$pred" || { echo "FAILED: predict said '$pred', training '$line'"; exit 1; }
    reference g.h5 s2/checkpoint.h5 p.h5
    $py - p.h5 t.txt t.h5 <<'PY' || exit 1
import sys, h5py, numpy as np
p = h5py.File(sys.argv[1], "r")
assert np.array_equal(np.loadtxt(sys.argv[2], dtype=np.int64), p["predictions"][:]), "predictions differ"
error = np.abs(h5py.File(sys.argv[3], "r")["embeddings"][:] - p["embeddings"][:]).max()
assert error < 1e-5, f"embeddings differ by {error}"
PY
    # bf16 features (row-normalized first): predict reads the checkpoint's feature dtype and rounds as the
    # training did, on either engine.
    out=$(mpi 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2 --hidden 8 --epochs 4 \
      --normalize-features --feature-dtype bf16 --checkpoint b2 --save-predictions bt.txt --save-embeddings bt.h5) ||
      exit 1
    grep -qF "features: held, fetched and cached in bf16" <<<"$out" || { echo "$out"; echo "FAILED: no bf16 line"; exit 1; }
    grep -qE "cache [0-9]+ bf16 rows" <<<"$out" || { echo "$out"; echo "FAILED: no bf16 cache"; exit 1; }
    line=$(grep "exact evaluation of epoch" <<<"$out") || { echo "FAILED: no exact evaluation line"; exit 1; }
    want=$(sed -E 's/.*: (train [0-9.]+ valid [0-9.]+ test [0-9.]+)$/\1/' <<<"$line")
    for engine in "layerwise --partition random-4" "full --grid 1x2x2"; do
      pred=$(mpi 4 "$TESSERA" predict --checkpoint b2 --data g.h5 --output bp.h5 --embeddings --engine $engine) || exit 1
      grep -qF "accuracy $want" <<<"$pred" || { echo "FAILED: predict ($engine) said '$pred', training '$line'"; exit 1; }
      $py - bp.h5 bt.txt bt.h5 <<'PY' || { echo "FAILED: engine $engine"; exit 1; }
import sys, h5py, numpy as np
p = h5py.File(sys.argv[1], "r")
assert np.array_equal(np.loadtxt(sys.argv[2], dtype=np.int64), p["predictions"][:]), "predictions differ"
error = np.abs(h5py.File(sys.argv[3], "r")["embeddings"][:] - p["embeddings"][:]).max()
assert error < 1e-5, f"embeddings differ by {error}"
PY
    done
    # bf16 features on the 3D grid (full graph, then mini-batch): the outputs train saves are predict's on
    # the checkpoint, on another grid.
    # One graph layer: its embeddings are the features, widened.
    # A GAT is handed them widened.
    for mode in "--grid 1x2x1" "--mode minibatch --grid 2x1x1x1 --batch-size 0.3 --model sage" "--layers 1" \
      "--grid 2x1x1 --model gat --heads 2"; do
      out=$(mpi 2 "$TESSERA" train --data g.h5 $mode --hidden 16 --epochs 4 --normalize-features \
        --feature-dtype bf16 --checkpoint g2 --overwrite-checkpoint --save-predictions gt.txt \
        --save-embeddings gt.h5) || exit 1
      grep -qE "features: held in bf16 \(rounded once at load; (graph layer 0's SpMM|widened into one fp32 copy for gat's)" <<<"$out" ||
        { echo "$out"; echo "FAILED: no bf16 line"; exit 1; }
      mpi 4 "$TESSERA" predict --checkpoint g2 --data g.h5 --output gp.h5 --embeddings --engine full \
        --grid 2x1x2 --quiet >/dev/null || exit 1
      $py - gp.h5 gt.txt gt.h5 <<'PY' || { echo "FAILED: $mode"; exit 1; }
import sys, h5py, numpy as np
p = h5py.File(sys.argv[1], "r")
assert np.array_equal(np.loadtxt(sys.argv[2], dtype=np.int64), p["predictions"][:]), "predictions differ"
error = np.abs(h5py.File(sys.argv[3], "r")["embeddings"][:] - p["embeddings"][:]).max()
assert error < 1e-5, f"embeddings differ by {error}"
PY
    done
    # --eval exact: every evaluation layer-wise; the best epoch's numbers are then the exact ones.
    out=$(mpi 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2 --hidden 8 --layers 3 --epochs 4 \
      --eval exact) || exit 1
    best=$(tail -n 1 <<<"$out" | sed -E 's/best valid ([0-9.]+) at epoch.*: test ([0-9.]+) .*/valid \1 test \2/')
    grep "exact evaluation" <<<"$out" | grep -qF "$best" || { echo "FAILED: $out"; exit 1; }
    # --final-eval sampled: no exact pass.
    out=$(mpi 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2 --epochs 2 --final-eval sampled) ||
      exit 1
    grep -q "exact evaluation" <<<"$out" && { echo "FAILED: an exact evaluation with --final-eval sampled"; exit 1; }
    exit 0 ;;
  predict_gat)
    $py -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: no python3-h5py / numpy"; exit 77; }
    "$TESSERA" prep synth --kind csbm --nodes 600 --edges 3000 --features 12 --classes 4 --seed 3 -o g.h5 >/dev/null || exit 1
    "$TESSERA" partition --data g.h5 --parts 2 >/dev/null && "$TESSERA" partition --data g.h5 --parts 4 >/dev/null || exit 1
    gat=(--model gat --hidden 4 --heads 3 --output-heads 2 --attention-dropout 0.2 --quiet)
    # GAT checkpoints of the three modes (a resumed full-graph run is the straight one), against the reference.
    mpi 4 "$TESSERA" train --data g.h5 --grid 1x2x2 --epochs 6 --checkpoint full "${gat[@]}" >/dev/null || exit 1
    "$TESSERA" train --data g.h5 --epochs 3 --checkpoint half "${gat[@]}" >/dev/null || exit 1
    mpi 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 6 --checkpoint half --resume "${gat[@]}" >/dev/null || exit 1
    $py - full/checkpoint.h5 half/checkpoint.h5 <<'PY' || exit 1
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for name in a["param"]:
    error = np.abs(a["param/" + name][:] - b["param/" + name][:]).max() / max(1.0, np.abs(a["param/" + name][:]).max())
    assert error < 1e-4, f"the resumed run's {name} differs by {error}"
PY
    mpi 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 2x1x1x1 --batch-size 0.3 --epochs 4 --checkpoint mini \
      "${gat[@]}" >/dev/null || exit 1
    mpi 2 "$TESSERA" train --data g.h5 --mode sampled --epochs 3 --checkpoint sampled --eval-every 0 "${gat[@]}" \
      >/dev/null || exit 1
    for ck in full mini sampled; do
      "$TESSERA" predict --checkpoint $ck --data g.h5 --output $ck-1.h5 --probabilities --embeddings --quiet \
        >/dev/null || exit 1
      reference g.h5 $ck/checkpoint.h5 $ck-1.h5
    done
    for ranks in 2 4; do
      mpi $ranks "$TESSERA" predict --checkpoint sampled --data g.h5 --output s.h5 --probabilities --embeddings \
        --embeddings-layer 1 --engine layerwise --quiet >/dev/null || exit 1
      reference g.h5 sampled/checkpoint.h5 s.h5
    done
    mpi 8 "$TESSERA" predict --checkpoint full --data g.h5 --output f.h5 --embeddings --grid 2x2x2 --quiet >/dev/null || exit 1
    reference g.h5 full/checkpoint.h5 f.h5
    # Nine nodes on 8 ranks (nearly empty blocks, one-row parts), and a multigraph through both engines.
    "$TESSERA" prep synth --kind csbm --nodes 9 --edges 16 --features 3 --classes 2 --seed 2 -o tiny.h5 >/dev/null || exit 1
    "$TESSERA" train --data tiny.h5 --epochs 2 --checkpoint tiny "${gat[@]}" >/dev/null || exit 1
    for engine in "--engine layerwise" "--grid 2x2x2"; do
      mpi 8 "$TESSERA" predict --checkpoint tiny --data tiny.h5 --output t.h5 --probabilities $engine --quiet \
        >/dev/null || exit 1
      reference tiny.h5 tiny/checkpoint.h5 t.h5
    done
    $py "$SOURCE_DIR/tests/fixtures/make_ogb_fixture.py" ogb >/dev/null || exit 1
    "$TESSERA" prep ogb ogb -o multi.h5 >/dev/null || exit 1
    "$TESSERA" train --data multi.h5 --epochs 3 --checkpoint multi "${gat[@]}" >/dev/null || exit 1
    for engine in full layerwise; do
      mpi 2 "$TESSERA" predict --checkpoint multi --data multi.h5 --output u.h5 --probabilities --engine $engine \
        --quiet >/dev/null || exit 1
      reference multi.h5 multi/checkpoint.h5 u.h5
    done
    exit 0 ;;
  predict_multi_label)
    $py -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: no python3-h5py / numpy"; exit 77; }
    metric() { $py "$here/reference_metric.py" "$@" || { echo "FAILED: metric $*"; exit 1; }; }
    "$TESSERA" prep synth --nodes 700 --edges 3500 --features 10 --classes 4 --tasks 5 --unobserved 0.1 \
      --signal 0.5 --seed 4 -o ml.h5 >/dev/null || exit 1
    for parts in 2 4; do "$TESSERA" partition --data ml.h5 --parts $parts >/dev/null || exit 1; done
    # Checkpoints of every mode and grid, each run scored by another metric.
    common=(--data ml.h5 --epochs 12 --hidden 8 --quiet)
    "$TESSERA" train "${common[@]}" --checkpoint full1 >/dev/null || exit 1
    mpi 4 "$TESSERA" train "${common[@]}" --grid 2x2x1 --metric ap --checkpoint full4 >/dev/null || exit 1
    mpi 8 "$TESSERA" train "${common[@]}" --grid 2x2x2 --metric f1-macro --checkpoint full8 >/dev/null || exit 1
    mpi 2 "$TESSERA" train "${common[@]}" --mode minibatch --grid 2x1x1x1 --batch-size 0.3 --model sage \
      --metric f1-micro --checkpoint mini >/dev/null || exit 1
    mpi 2 "$TESSERA" train "${common[@]}" --mode sampled --partition metis-2 --eval exact --checkpoint sampled \
      >/dev/null || exit 1
    # predict writes each task's prediction and probability (against the dense reference) and the run's
    # metric on every split, which NumPy computes again from the probabilities: equal, and equal to the
    # training run's own score of the best-validation parameters.
    for run in "full1 1" "full4 2 --grid 1x2x1" "full8 8 --grid 2x2x2" "mini 4 --engine layerwise" \
               "sampled 4 --partition metis-4"; do
      set -- $run
      ck=$1 ranks=$2; shift 2
      mpi $ranks "$TESSERA" predict --checkpoint $ck --data ml.h5 --output $ck.h5 --probabilities --csv $ck.csv \
        "$@" --quiet >/dev/null || exit 1
      reference ml.h5 $ck/checkpoint.h5 $ck.h5
      metric ml.h5 $ck.h5 $ck/checkpoint.h5
    done
    $py - full4.h5 full4.csv <<'PY' || exit 1
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
csv = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1, dtype=np.int64)
assert open(sys.argv[2]).readline().strip() == "node,task0,task1,task2,task3,task4", "csv header"
assert np.array_equal(csv[:, 0], f["nodes"][:]) and np.array_equal(csv[:, 1:], f["predictions"][:]), "csv differs"
assert f.attrs["metric"] in ("average_precision", b"average_precision"), f.attrs["metric"]
PY
    # Another metric than the run's, one split, and a reordered graph (outputs and truth in its original order).
    mpi 2 "$TESSERA" predict --checkpoint full1 --data ml.h5 --output v.h5 --probabilities --nodes valid \
      --metric f1-macro --quiet >/dev/null || exit 1
    metric ml.h5 v.h5
    "$TESSERA" prep reorder ml.h5 -o re.h5 --order rcm >/dev/null || exit 1
    "$TESSERA" train --data re.h5 --epochs 6 --hidden 8 --metric ap --checkpoint re --quiet >/dev/null || exit 1
    mpi 4 "$TESSERA" predict --checkpoint re --data re.h5 --output re-out.h5 --probabilities --quiet >/dev/null ||
      exit 1
    metric ml.h5 re-out.h5 re/checkpoint.h5
    # Nine nodes on 8 ranks: one-row blocks and parts, tasks without both classes in a split.
    "$TESSERA" prep synth --kind csbm --nodes 9 --edges 16 --features 3 --classes 2 --tasks 3 --seed 2 -o tiny.h5 \
      >/dev/null || exit 1
    "$TESSERA" train --data tiny.h5 --epochs 2 --checkpoint tiny --quiet >/dev/null || exit 1
    for engine in "--engine layerwise" "--grid 2x2x2"; do
      mpi 8 "$TESSERA" predict --checkpoint tiny --data tiny.h5 --output t.h5 --probabilities $engine --quiet \
        >/dev/null || exit 1
      reference tiny.h5 tiny/checkpoint.h5 t.h5
      metric tiny.h5 t.h5 tiny/checkpoint.h5
    done
    exit 0 ;;
  bad_predict)
    setup
    expect_error "--checkpoint is required" "-" -- "$TESSERA" predict --data g.h5 --csv p.csv
    expect_error "nothing to write: give --output FILE.h5 and/or --csv FILE" "-" -- \
      "$TESSERA" predict --checkpoint full --data g.h5
    expect_error "--probabilities needs --output FILE.h5" "p.csv" -- \
      "$TESSERA" predict --checkpoint full --data g.h5 --csv p.csv --probabilities
    expect_error "--nodes must be all, train, valid or test, not 'some'" "p.csv" -- \
      "$TESSERA" predict --checkpoint full --data g.h5 --csv p.csv --nodes some
    expect_error "--embeddings-layer must be in \[0, 3\] for this 3-layer model, not 4" "o.h5*" -- \
      $MPIEXEC -n 2 "$TESSERA" predict --checkpoint full --data g.h5 --output o.h5 --embeddings --embeddings-layer 4
    expect_error "--parameters best, but the checkpoint holds no best-validation parameters" "o.h5*" -- \
      "$TESSERA" predict --checkpoint sampled --data g.h5 --output o.h5 --parameters best
    expect_error "--metric must be auto, accuracy, rocauc, ap, f1-micro, f1-macro, hits@20, hits@50, hits@100 or mrr, not 'auc'" "-" -- \
      "$TESSERA" predict --checkpoint full --data g.h5 --output o.h5 --metric auc
    expect_error "g.h5: --metric rocauc scores a multi-label task" "o.h5*" -- \
      $MPIEXEC -n 2 "$TESSERA" predict --checkpoint full --data g.h5 --output o.h5 --metric rocauc
    expect_error "--engine must be auto, full or layerwise, not 'fast'" "-" -- \
      "$TESSERA" predict --checkpoint full --data g.h5 --output o.h5 --engine fast
    expect_error "--grid is for --engine full" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" predict --checkpoint full --data g.h5 --output o.h5 --engine layerwise --grid 2x1x1
    expect_error "--checkpoint nowhere: no checkpoint there \(nowhere cannot be read" "-" -- \
      "$TESSERA" predict --checkpoint nowhere --data g.h5 --output o.h5
    expect_error "g.h5: not a Tessera checkpoint" "o.h5*" -- "$TESSERA" predict --checkpoint g.h5 --data g.h5 --output o.h5
    expect_error "--eval must be sampled or exact, not 'fast'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --partition block --eval fast
    expect_error "--final-eval must be exact or sampled, not 'no'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --partition block --final-eval no
    cp g.h5 keep.h5
    expect_error "--output.*names.*--data|--data.*--output" "-" -- "$TESSERA" predict --checkpoint full --data g.h5 --output g.h5
    cmp g.h5 keep.h5 || { echo "FAILED: the graph file was touched"; exit 1; }
    "$TESSERA" prep synth --kind csbm --nodes 100 --edges 400 --features 5 --classes 4 --seed 1 -o other.h5 >/dev/null || exit 1
    expect_error "other.h5: 5 features and 4 classes, but the checkpoint's model takes 12 features to 4 classes" \
      "o.h5*" -- $MPIEXEC -n 2 "$TESSERA" predict --checkpoint full --data other.h5 --output o.h5
    "$TESSERA" prep synth --kind csbm --nodes 100 --edges 400 --features 12 --classes 4 --seed 1 -o new.h5 >/dev/null || exit 1
    # A new graph with the same features: inductive inference, said in the log.
    out=$("$TESSERA" predict --checkpoint full --data new.h5 --csv n.csv) || exit 1
    grep -q "is not the graph the checkpoint was trained on" <<<"$out" || { echo "FAILED: $out"; exit 1; }
    [ "$(wc -l <n.csv)" = 101 ] || { echo "FAILED: n.csv has $(wc -l <n.csv) lines"; exit 1; }
    # A checkpoint whose run settings name a feature dtype Tessera does not know is refused, not guessed.
    if $py -c 'import h5py' 2>/dev/null; then
      cp full/checkpoint.h5 dt.h5 && $py - <<'PY' || exit 1
import json, h5py
with h5py.File("dt.h5", "r+") as f:
    run = f.attrs["run"]; run = json.loads(run.decode() if isinstance(run, bytes) else str(run))
    run["feature_dtype"] = "f16"
    f.attrs["run"] = json.dumps(run)
PY
      expect_error "dt.h5: unknown feature dtype 'f16' in its run settings; refused" "o.h5*" -- \
        "$TESSERA" predict --checkpoint dt.h5 --data g.h5 --output o.h5
    fi ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
