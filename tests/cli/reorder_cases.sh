#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# reorder_cases.sh CASE: tests of `tessera prep reorder`. Environment as cases.sh (TESSERA, MPIEXEC,
# SOURCE_DIR). Exit 0 = pass, 77 = skipped, anything else = failure.
set -u
case_name=$1
work=$(mktemp -d /tmp/tessera-reorder-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
expect_error() { bash "$SOURCE_DIR/tests/cli/expect_error.sh" "$@" || exit 1; }
mpi() { $MPIEXEC -n "$@"; }
py=python3; $py -c 'import h5py, numpy' 2>/dev/null || py=/usr/bin/python3
# same A B: node outputs of a run on the input graph (A) and on a reordered copy (B) are the same nodes'
# values: embeddings within float round-off (the aggregation sums a row's neighbours in another order),
# predictions equal wherever the two largest logits are not within that round-off of each other.
same() {
  $py - "$@" <<'PY' || { echo "FAILED: outputs of $1 and $2 differ"; exit 1; }
import sys
import h5py, numpy as np
a, b = sys.argv[1:3]
ea, eb = h5py.File(f"e-{a}.h5")["embeddings"][:], h5py.File(f"e-{b}.h5")["embeddings"][:]
err = np.abs(ea - eb).max() / max(np.abs(ea).max(), 1e-30)
pa, pb = np.loadtxt(f"p-{a}.txt", dtype=np.int64), np.loadtxt(f"p-{b}.txt", dtype=np.int64)
print(f"{a} vs {b}: embeddings {ea.shape}, largest difference {err:.2e} of the largest value; "
      f"{int((pa != pb).sum())} predictions differ")
assert ea.shape == eb.shape and err < 1e-4 and (pa == pb).mean() > 0.99, "outputs differ"
PY
}
train() {  # train RANKS TAG GRAPH [OPTIONS...]: full-graph run writing e-TAG.h5 and p-TAG.txt
  local ranks=$1 tag=$2 graph=$3
  shift 3
  mpi "$ranks" "$TESSERA" train --data "$graph" --layers 3 --hidden 8 --epochs 4 --dropout 0 --quiet \
    --save-embeddings "e-$tag.h5" --save-predictions "p-$tag.txt" "$@" >/dev/null || exit 1
}

case "$case_name" in
  reorder_outputs)
    $py -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: no python3-h5py / numpy"; exit 77; }
    "$TESSERA" prep synth --kind csbm --nodes 700 --edges 3500 --features 10 --classes 4 --seed 2 -o g.h5 \
      >/dev/null || exit 1
    "$TESSERA" partition --data g.h5 --parts 2 >/dev/null || exit 1
    for order in rcm degree metis; do
      out=$(mpi 2 "$TESSERA" prep reorder g.h5 -o "r-$order.h5" --order $order --part-nodes 64) || exit 1
      echo "$out"
      grep -qE "^order $order .*edges within 1024 ids of their row" <<<"$out" || { echo "FAILED: no order line"; exit 1; }
      grep -qF "partition metis-2 of g.h5 is not carried over" <<<"$out" || { echo "FAILED: no partition line"; exit 1; }
      info=$(mpi 2 "$TESSERA" info "r-$order.h5") || exit 1
      for want in "valid:     yes" "order:     reordered" "nodes:     700" "splits:    test 571, train 62, valid 67"; do
        grep -qF "$want" <<<"$info" || { echo "FAILED: info r-$order.h5 lacks '$want'"; exit 1; }
      done
    done
    # A reordered file reordered again keeps the first input's ids.
    "$TESSERA" prep reorder r-degree.h5 -o r-twice.h5 --order rcm >/dev/null || exit 1
    # Full-graph training on 1, 2, 4 and 8 ranks (one grid each, and 2x2x2): outputs in the input's order.
    train 1 g1 g.h5
    for order in rcm degree metis twice; do train 1 "$order-1" "r-$order.h5"; same g1 "$order-1"; done
    for run in "2 2x1x1 metis" "4 1x2x2 rcm" "4 1x4x1 degree" "8 2x2x2 degree" "8 1x1x8 metis"; do
      read -r ranks grid order <<<"$run"
      train "$ranks" "g-$grid" g.h5 --grid "$grid"
      train "$ranks" "$order-$grid" "r-$order.h5" --grid "$grid"
      same "g-$grid" "$order-$grid"
    done
    # On a grid the permutations move runs of 64 nodes of a reordered file (its locality kept), and single nodes
    # of any other file.
    mpi 2 "$TESSERA" train --data r-metis.h5 --grid 2x1x1 --layers 2 --hidden 4 --epochs 1 | grep -F "permute double in runs of 64" ||
      { echo "FAILED: a reordered file's permutation is not chunked"; exit 1; }
    mpi 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --layers 2 --hidden 4 --epochs 1 | grep -F "(permute double, " ||
      { echo "FAILED: a plain file's permutation is chunked"; exit 1; }
    # One checkpoint (sampled mode, trained on the input) predicted on the reordered files by both engines.
    mpi 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2 --layers 3 --hidden 8 --epochs 2 \
      --checkpoint ck --eval-every 0 --quiet >/dev/null || exit 1
    mpi 2 "$TESSERA" predict --checkpoint ck --data g.h5 --output q-g.h5 --embeddings --quiet >/dev/null || exit 1
    for run in "2 layerwise metis" "4 layerwise rcm" "4 full degree" "1 full twice"; do
      read -r ranks engine order <<<"$run"
      mpi "$ranks" "$TESSERA" predict --checkpoint ck --data "r-$order.h5" --engine "$engine" \
        --output "q-$order-$ranks.h5" --embeddings --quiet >/dev/null || exit 1
      $py - "q-$order-$ranks.h5" <<'PY' || { echo "FAILED: predict on the reordered $order file"; exit 1; }
import sys
import h5py, numpy as np
a, b = h5py.File("q-g.h5"), h5py.File(sys.argv[1])
assert (a["nodes"][:] == b["nodes"][:]).all(), "node ids differ"
err = np.abs(a["embeddings"][:] - b["embeddings"][:]).max() / np.abs(a["embeddings"][:]).max()
same = (a["predictions"][:] == b["predictions"][:]).mean()
print(f"predict {sys.argv[1]}: embeddings differ by {err:.2e} of the largest, predictions {same:.4f} the same")
assert err < 1e-4 and same > 0.99
assert a.attrs["graph"] != b.attrs["graph"]
PY
    done
    # The sampled mode's exact outputs of a run on a reordered file are in the input's order too: they
    # equal predict's on that run's checkpoint.
    "$TESSERA" partition --data r-rcm.h5 --parts 2 >/dev/null || exit 1
    mpi 2 "$TESSERA" train --data r-rcm.h5 --mode sampled --layers 3 --hidden 8 --epochs 2 --eval-every 0 \
      --checkpoint ck-r --save-embeddings e-sampled.h5 --quiet >/dev/null || exit 1
    mpi 2 "$TESSERA" predict --checkpoint ck-r --data r-rcm.h5 --output q-r.h5 --embeddings --quiet >/dev/null || exit 1
    $py - <<'PY' || { echo "FAILED: sampled outputs on a reordered file"; exit 1; }
import h5py, numpy as np
e, q = h5py.File("e-sampled.h5")["embeddings"][:], h5py.File("q-r.h5")
assert (q["nodes"][:] == np.arange(len(e))).all()
err = np.abs(e - q["embeddings"][:]).max() / np.abs(e).max()
print(f"sampled training's exact embeddings vs predict's: {err:.2e}")
assert err < 1e-4
PY
    ;;
  bad_reorder)
    "$TESSERA" prep synth --kind csbm --nodes 200 --edges 800 --features 4 --classes 3 --seed 1 -o g.h5 >/dev/null || exit 1
    cp g.h5 keep.h5
    expect_error "g.h5: --output names the input of prep reorder" - -- "$TESSERA" prep reorder g.h5 -o g.h5
    cmp g.h5 keep.h5 || { echo "FAILED: the input was changed"; exit 1; }
    expect_error "missing.h5: cannot read" "out.h5*" -- "$TESSERA" prep reorder missing.h5 -o out.h5
    echo "not a graph" >text.h5
    expect_error "text.h5: not an HDF5 file" "out.h5*" -- $MPIEXEC -n 2 "$TESSERA" prep reorder text.h5 -o out.h5
    out=$("$TESSERA" prep reorder g.h5 -o out.h5 --order random 2>&1) && { echo "FAILED: --order random accepted"; exit 1; }
    grep -q -- "--order" <<<"$out" || { echo "FAILED: $out"; exit 1; }
    out=$("$TESSERA" prep reorder g.h5 -o out.h5 --order metis --part-nodes 0 2>&1) && { echo "FAILED: --part-nodes 0"; exit 1; }
    grep -q -- "--part-nodes" <<<"$out" || { echo "FAILED: $out"; exit 1; }
    # A reordered file whose original ids are not a permutation: info and every output refuse it.
    "$TESSERA" prep reorder g.h5 -o r.h5 >/dev/null || exit 1
    $py -c 'import h5py' 2>/dev/null || { echo "skipped the damaged-file part: no h5py"; exit 0; }
    $py -c "
import h5py
with h5py.File('r.h5', 'r+') as f:
    f['node/original_id'][5] = f['node/original_id'][6]
" || exit 1
    expect_error "r.h5: dataset /node/original_id: id [0-9]+ is listed twice" - -- $MPIEXEC -n 2 "$TESSERA" info r.h5
    expect_error "r.h5: dataset /node/original_id: id [0-9]+ is listed twice" "p.txt*" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data r.h5 --epochs 1 --layers 2 --hidden 4 --save-predictions p.txt --quiet
    "$TESSERA" train --data g.h5 --epochs 2 --layers 2 --hidden 4 --checkpoint ck --quiet >/dev/null || exit 1
    expect_error "r.h5: dataset /node/original_id: id [0-9]+ is listed twice" "q.h5*" -- \
      $MPIEXEC -n 2 "$TESSERA" predict --checkpoint ck --data r.h5 --output q.h5
    ;;
  *)
    echo "unknown case $case_name"
    exit 2 ;;
esac
