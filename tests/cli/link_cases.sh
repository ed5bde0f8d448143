#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# link_cases.sh CASE: link-prediction command-line tests. Environment: TESSERA, MPIEXEC, SOURCE_DIR,
# SHARED_DIR, PYTHONPATH (the built Python package, for tessera.convert). Exit 0 = pass, 77 = skipped.
set -u
case_name=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/tessera-link-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
expect_error() { bash "$here/expect_error.sh" "$@" || exit 1; }
mpi() { $MPIEXEC -n "$@"; }
py=/usr/bin/python3
convert() { $py -m tessera.convert "$@" >/dev/null || { echo "FAILED: tessera.convert $*"; exit 1; }; }
# same_result A B: two runs' last lines agree up to their timing.
same_result() {
  local a b
  a=$(tail -1 <<<"$1") b=$(tail -1 <<<"$2")
  [ "${a%%(mean*}" = "${b%%(mean*}" ] || { echo "FAILED: '$a' and '$b' differ"; exit 1; }
}
# A GAE-style encoder: two GCN layers, 32 and 16 wide, no dropout, as Kipf & Welling's graph auto-encoder.
gae=(--task link --hidden 32 --embedding-dim 16 --dropout 0 --lr 0.01 --quiet)

case "$case_name" in
  train_link_cora)
    # Cora with an 85/5/10 edge split: test ROC-AUC at the best validation epoch >= 0.90 (GAE: 91.0), the
    # same run on a 2x2x1 grid, and a run stopped at epoch 120 and resumed equal to the uninterrupted one.
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: Cora is absent"; exit 77; }
    convert ogb "$SHARED_DIR/datasets/cora" cora.h5 --link-split 0.05,0.1
    one=$("$TESSERA" train --data cora.h5 "${gae[@]}" --epochs 200 --eval-every 10) || exit 1
    echo "$one"
    test=$(sed -nE 's/^best valid [0-9.]+ at epoch [0-9]+: test ([0-9.]+).*/\1/p' <<<"$one")
    $py -c "import sys; sys.exit(0 if float('$test') >= 0.90 else 1)" || { echo "FAILED: test ROC-AUC $test"; exit 1; }
    grid=$(mpi 4 "$TESSERA" train --data cora.h5 "${gae[@]}" --epochs 200 --eval-every 10 --grid 2x2x1) || exit 1
    same_result "$one" "$grid"
    "$TESSERA" train --data cora.h5 "${gae[@]}" --epochs 120 --eval-every 10 --checkpoint ck >/dev/null || exit 1
    resumed=$(mpi 2 "$TESSERA" train --data cora.h5 "${gae[@]}" --epochs 200 --eval-every 10 --checkpoint ck \
              --resume) || exit 1
    same_result "$one" "$resumed"
    # The MLP decoder on the same embeddings: test ROC-AUC >= 0.90 too.
    mlp=$("$TESSERA" train --data cora.h5 "${gae[@]}" --epochs 200 --eval-every 10 --link-decoder mlp) || exit 1
    echo "$mlp"
    test=$(sed -nE 's/^best valid [0-9.]+ at epoch [0-9]+: test ([0-9.]+).*/\1/p' <<<"$mlp")
    $py -c "import sys; sys.exit(0 if float('$test') >= 0.90 else 1)" || { echo "FAILED: MLP test ROC-AUC $test"; exit 1; } ;;
  train_link_sampled)
    # Sampled link training on Cora (2 ranks, a METIS partition, fanouts 10,10): test ROC-AUC within 1.5
    # points of the full-graph run's, and predict from its checkpoint scores the same; ogbl-citation2's
    # layout (no node labels) trains and is scored by MRR.
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: Cora is absent"; exit 77; }
    convert ogb "$SHARED_DIR/datasets/cora" cora.h5 --link-split 0.05,0.1
    "$TESSERA" partition --data cora.h5 --parts 2 --output parts.h5 >/dev/null || exit 1
    full=$("$TESSERA" train --data cora.h5 "${gae[@]}" --epochs 200 --eval-every 10) || exit 1
    sampled=$(mpi 2 "$TESSERA" train --data cora.h5 "${gae[@]}" --epochs 200 --eval-every 10 --mode sampled \
              --partition-file parts.h5 --fanouts 10,10 --batch-size 2500 --checkpoint ck) || exit 1
    echo "full: $full"$'\n'"sampled: $sampled"
    a=$(sed -nE 's/^best valid [0-9.]+ at epoch [0-9]+: test ([0-9.]+).*/\1/p' <<<"$full")
    b=$(sed -nE 's/^best valid [0-9.]+ at epoch [0-9]+: test ([0-9.]+).*/\1/p' <<<"$sampled")
    $py -c "import sys; sys.exit(0 if float('$b') >= float('$a') - 0.015 else 1)" ||
      { echo "FAILED: sampled test ROC-AUC $b, full $a"; exit 1; }
    # Its checkpoint predicts on the full engine: the best epoch's test score again.
    printf '0 1\n5 9\n' >pairs.txt
    predicted=$("$TESSERA" predict --checkpoint ck --data cora.h5 --edges pairs.txt --output p.h5) || exit 1
    grep -q "roc_auc train [0-9.]* valid [0-9.]* test $b " <<<"$predicted" ||
      { echo "FAILED: predict says '$predicted', the run test $b"; exit 1; }
    $py "$SOURCE_DIR/tests/fixtures/make_ogbl_fixture.py" c2 --layout citation2 >/dev/null || exit 1
    convert ogbl c2 c2.h5
    out=$(mpi 2 "$TESSERA" train --data c2.h5 --mode sampled --epochs 5 --eval-every 5) || exit 1
    echo "$out"
    grep -qE "mrr  train [0-9.]+  valid [0-9.]+  test" <<<"$out" || { echo "FAILED: not scored by MRR"; exit 1; } ;;
  train_link_ogbl)
    # OGB's link layouts: citation2's per-edge negatives are scored by MRR, collab's shared ones by Hits@K;
    # the same on every grid of 4 and 8 ranks as on one.
    for layout in citation2 collab; do
      $py "$SOURCE_DIR/tests/fixtures/make_ogbl_fixture.py" "$layout" --layout "$layout" >/dev/null || exit 1
      convert ogbl "$layout" "$layout.h5"
    done
    one=$("$TESSERA" train --data citation2.h5 --epochs 20 --eval-every 5) || exit 1
    echo "$one"
    grep -qE "mrr  train [0-9.]+  valid [0-9.]+  test" <<<"$one" || { echo "FAILED: not scored by MRR"; exit 1; }
    for grid in 2x2x1 1x2x2 2x2x2; do
      ranks=$(( ${grid:0:1} * ${grid:2:1} * ${grid:4:1} ))
      out=$(mpi "$ranks" "$TESSERA" train --data citation2.h5 --epochs 20 --eval-every 5 --grid "$grid") || exit 1
      same_result "$one" "$out"
    done
    one=$("$TESSERA" train --data collab.h5 --epochs 20 --eval-every 5 --metric hits@20 --link-negatives 3) || exit 1
    grep -q "hits@20  train" <<<"$one" || { echo "$one"; echo "FAILED: not scored by hits@20"; exit 1; }
    out=$(mpi 4 "$TESSERA" train --data collab.h5 --epochs 20 --eval-every 5 --metric hits@20 --link-negatives 3 \
          --grid 2x1x2) || exit 1
    same_result "$one" "$out"
    # Pair batches (90 training pairs in steps of 32: 3 steps an epoch): the same on a grid, and resumed
    # after epoch 8 the same run.
    batches=(--data citation2.h5 --eval-every 4 --link-batch 32 --quiet)
    one=$("$TESSERA" train "${batches[@]}" --epochs 16) || exit 1
    out=$(mpi 4 "$TESSERA" train "${batches[@]}" --epochs 16 --grid 2x2x1) || exit 1
    same_result "$one" "$out"
    "$TESSERA" train "${batches[@]}" --epochs 8 --checkpoint ck >/dev/null || exit 1
    out=$("$TESSERA" train "${batches[@]}" --epochs 16 --checkpoint ck --resume) || exit 1
    same_result "$one" "$out" ;;
  predict_link)
    # tessera predict --edges: a link checkpoint scores given pairs, the same on 1 and 4 ranks, and the
    # valid split's scores it writes give the ROC-AUC the run reported; what it cannot do is refused.
    $py "$SOURCE_DIR/tests/fixtures/make_ogbl_fixture.py" cb --layout collab >/dev/null || exit 1
    convert ogbl cb cb.h5
    "$TESSERA" train --data cb.h5 --epochs 30 --eval-every 5 --metric rocauc --checkpoint ck --quiet >train.txt || exit 1
    best=$(sed -nE 's/^best valid ([0-9.]+) at epoch.*/\1/p' train.txt)
    $py - <<'PY' || exit 1
import h5py
with h5py.File("cb.h5") as f, open("pairs.txt", "w") as out:
    out.write("# the valid split's positives, then its negatives\n")
    for part in ("edges", "negatives"):
        for u, v in f["link/valid/" + part][:]:
            out.write(f"{u},{v}\n")
PY
    out=$("$TESSERA" predict --checkpoint ck --data cb.h5 --edges pairs.txt --output p1.h5 --csv p1.csv) || exit 1
    echo "$out"
    grep -qF "predict: roc_auc train" <<<"$out" && grep -qF "valid $best" <<<"$out" ||
      { echo "FAILED: predict's valid score is not the run's $best"; exit 1; }
    mpi 4 "$TESSERA" predict --checkpoint ck --data cb.h5 --edges pairs.txt --output p4.h5 --grid 2x2x1 --quiet || exit 1
    $py - "$best" <<'PY' || exit 1
import sys, h5py, numpy as np
with h5py.File("p1.h5") as a, h5py.File("p4.h5") as b, h5py.File("cb.h5") as g:
    assert a.attrs["format"] in (b"tessera-link-predictions", "tessera-link-predictions"), dict(a.attrs)
    assert np.array_equal(a["edges"][:], b["edges"][:])
    assert np.allclose(a["scores"][:], b["scores"][:], rtol=1e-5, atol=1e-5)
    s = a["scores"][:]
    assert np.allclose(a["probabilities"][:], 1 / (1 + np.exp(-s)), atol=1e-6)
    k = len(g["link/valid/edges"])
    pos, neg = s[:k], s[k:]
    auc = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (len(pos) * len(neg))
    assert abs(auc - float(sys.argv[1])) < 1e-4, (auc, sys.argv[1])
    print(f"valid ROC-AUC from the written scores {auc:.4f}")
PY
    [ "$(head -1 p1.csv)" = "source,target,score,probability" ] || { echo "FAILED: csv header"; exit 1; }
    # A checkpoint with the MLP decoder: predict rebuilds it from the checkpoint and scores as the run did,
    # the same on a 2x2x1 grid.
    "$TESSERA" train --data cb.h5 --epochs 30 --eval-every 5 --metric rocauc --link-decoder mlp \
      --link-decoder-layers 3 --checkpoint mk --quiet >train.txt || exit 1
    best=$(sed -nE 's/^best valid ([0-9.]+) at epoch.*/\1/p' train.txt)
    out=$("$TESSERA" predict --checkpoint mk --data cb.h5 --edges pairs.txt --output m1.h5) || exit 1
    grep -qF "+ mlp decoder 3x16" <<<"$out" && grep -qF "valid $best" <<<"$out" ||
      { echo "$out"; echo "FAILED: the MLP checkpoint's predict does not score valid $best"; exit 1; }
    mpi 4 "$TESSERA" predict --checkpoint mk --data cb.h5 --edges pairs.txt --output m4.h5 --grid 2x2x1 --quiet || exit 1
    $py -c "
import h5py, numpy as np
with h5py.File('m1.h5') as a, h5py.File('m4.h5') as b, h5py.File('p1.h5') as d:
    assert np.allclose(a['scores'][:], b['scores'][:], rtol=1e-5, atol=1e-5)
    assert not np.allclose(a['scores'][:], d['scores'][:])  # not the dot product's
" || { echo "FAILED: the MLP checkpoint's scores differ between 1 and 4 ranks"; exit 1; }
    # Its model attribute edited: a decoder it cannot build, or one larger than the file stores, is refused
    # before anything is built.
    for edit in "3x16:0x16" "3x16:3x1000000"; do
      cp mk/checkpoint.h5 edited.h5 && $py - "${edit%%:*}" "${edit##*:}" <<'PY' || exit 1
import sys, h5py, numpy as np
with h5py.File("edited.h5", "r+") as f:
    m = f.attrs["model"]; m = m.decode() if isinstance(m, bytes) else str(m)
    f.attrs["model"] = np.bytes_(m.replace(sys.argv[1], sys.argv[2]))
PY
      expect_error "edited.h5: ('mlp decoder 0x16' is not a link decoder tessera builds|its model attribute '.* \+ mlp decoder 3x1000000' needs at least [0-9]+ weights, but the file stores [0-9]+ parameter values)" "q.h5" -- \
        $MPIEXEC -n 2 "$TESSERA" predict --checkpoint edited.h5 --data cb.h5 --edges pairs.txt --output q.h5
    done
    printf "0,1\n3 x\n" >bad.txt
    expect_error "bad.txt: line 2: expected two node ids" "q.h5" -- \
      "$TESSERA" predict --checkpoint ck --data cb.h5 --edges bad.txt --output q.h5
    printf "# nothing\n\n" >empty.txt
    expect_error "empty.txt: no node pair in it" "q.h5" -- \
      "$TESSERA" predict --checkpoint ck --data cb.h5 --edges empty.txt --output q.h5
    printf "0,40\n" >far.txt
    expect_error "far.txt: line 1: node 40 is outside the graph's 40 nodes" "q.h5" -- \
      $MPIEXEC -n 2 "$TESSERA" predict --checkpoint ck --data cb.h5 --edges far.txt --output q.h5
    expect_error "is a link-prediction checkpoint: give --edges FILE" "q.h5" -- \
      "$TESSERA" predict --checkpoint ck --data cb.h5 --output q.h5
    expect_error "--probabilities is for node predictions" "q.h5" -- \
      "$TESSERA" predict --checkpoint ck --data cb.h5 --edges pairs.txt --output q.h5 --probabilities
    "$TESSERA" prep synth --nodes 200 --edges 800 -o nodes.h5 >/dev/null || exit 1
    "$TESSERA" train --data nodes.h5 --epochs 2 --checkpoint nk --quiet >/dev/null || exit 1
    expect_error "--edges scores node pairs with a link-prediction checkpoint" "q.h5" -- \
      "$TESSERA" predict --checkpoint nk --data nodes.h5 --edges pairs.txt --output q.h5 ;;
  bad_train_link)
    # What a link run cannot do is one line on every rank, before the load.
    $py "$SOURCE_DIR/tests/fixtures/make_ogbl_fixture.py" c2 --layout citation2 >/dev/null || exit 1
    convert ogbl c2 c2.h5
    $py "$SOURCE_DIR/tests/fixtures/make_ogbl_fixture.py" cb --layout collab >/dev/null || exit 1
    convert ogbl cb cb.h5
    "$TESSERA" prep synth --nodes 200 --edges 800 -o nodes.h5 >/dev/null || exit 1
    expect_error "nodes.h5 has no link splits" "-" -- $MPIEXEC -n 2 "$TESSERA" train --data nodes.h5 --task link
    expect_error "c2.h5 has no node labels: train its link splits with --task link" "-" -- \
      "$TESSERA" train --data c2.h5 --task node
    expect_error "--metric mrr ranks each positive against its own negatives" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data cb.h5 --metric mrr
    expect_error "--metric hits@50 ranks each positive against a shared negative set" "-" -- \
      "$TESSERA" train --data c2.h5 --metric hits@50
    expect_error "--metric accuracy scores a node task; a link task is scored by" "-" -- \
      "$TESSERA" train --data c2.h5 --metric accuracy
    expect_error "--metric mrr scores a link task" "-" -- "$TESSERA" train --data nodes.h5 --metric mrr
    expect_error "--task link trains in --mode full or sampled" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data c2.h5 --mode minibatch --grid 2x1x1x1 --batch-size 8
    expect_error "--link-batch is for --mode full; --mode sampled steps through --batch-size pairs" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data c2.h5 --mode sampled --link-batch 8
    expect_error "--save-predictions writes a class per node; a link task has none" "p.txt" -- \
      "$TESSERA" train --data c2.h5 --save-predictions p.txt
    expect_error "--link-negatives must be in \[1, 1024\], not 0" "-" -- \
      "$TESSERA" train --data c2.h5 --link-negatives 0
    expect_error "--link-batch must be in \[0, [0-9]+\], not -1" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data c2.h5 --link-batch -1
    expect_error "--embedding-dim must not be negative, not -2" "-" -- \
      "$TESSERA" train --data c2.h5 --embedding-dim -2
    expect_error "--link-negatives must be in \[1, 1024\], not 0" "-" -- \
      "$TESSERA" plan --data c2.h5 --ranks 2 --link-negatives 0
    expect_error "--link-decoder-layers must be in \[1, 16\], not 0" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data c2.h5 --link-decoder mlp --link-decoder-layers 0
    expect_error "--link-decoder-layers and --link-decoder-hidden shape --link-decoder mlp" "-" -- \
      "$TESSERA" train --data c2.h5 --link-decoder-hidden 8
    expect_error "--link-decoder scores node pairs of a link task; nodes.h5 trains a node task" "-" -- \
      "$TESSERA" train --data nodes.h5 --link-decoder mlp
    expect_error "--link-decoder: 'bilinear' is not one of dot, mlp|--link-decoder" "-" -- \
      "$TESSERA" train --data c2.h5 --link-decoder bilinear
    expect_error "--task: 'edges' is not one of auto, node, link|--task" "-" -- \
      "$TESSERA" train --data c2.h5 --task edges ;;
  *)
    echo "unknown case $case_name"
    exit 2 ;;
esac
