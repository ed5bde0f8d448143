#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cases.sh CASE: one command-line test. Environment: TESSERA, H5_TAMPER, ABORT_PROBE, MPIEXEC, SOURCE_DIR,
# SHARED_DIR (set by CMake). Exit 0 = pass, 77 = skipped, anything else = failure.
set -u
case_name=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/tessera-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
# A failed expectation ends the case: later lines must not hide it.
expect_error() { bash "$here/expect_error.sh" "$@" || exit 1; }
fixture() { python3 "$SOURCE_DIR/tests/fixtures/make_ogb_fixture.py" "$work/ds" "$@" >/dev/null || exit 1; }
good_h5() { fixture; "$TESSERA" prep ogb "$work/ds" -o "$work/g.h5" >/dev/null || exit 1; }
mpi() { $MPIEXEC -n "$@"; }
# wait_for_line FILE REGEX SECONDS: until a line of FILE matches (1 after SECONDS).
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 100; ++i)); do grep -qE "$2" "$1" && return 0; sleep 0.01; done
  return 1
}
# rank_pids TEXT: the tessera processes (not mpiexec) whose command line contains TEXT.
rank_pids() { pgrep -f -- "$1" | while read -r p; do [ "$(ps -o comm= -p "$p")" = tessera ] && echo "$p"; done; }

case "$case_name" in
  cora_prep_info)
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: $SHARED_DIR/datasets/cora is absent"; exit 77; }
    "$TESSERA" prep ogb "$SHARED_DIR/datasets/cora" -o cora.h5 --symmetrize || exit 1
    out=$(mpi 4 "$TESSERA" info cora.h5) || exit 1
    echo "$out"
    for want in "nodes:     2708" "edges:     10556 (symmetric" "features:  1433" "classes:   7" \
                "splits:    test 1000, train 140, valid 500" "valid:     yes"; do
      grep -qF "$want" <<<"$out" || { echo "FAILED: missing '$want'"; exit 1; }
    done ;;
  bf16_graph_file)
    # A graph file holding its features in bf16: prep writes it (version 3, 16-bit values), info says so, and
    # training reads it as the fp32 file whose features were rounded the same way; a bad dtype is refused.
    synth=(prep synth --kind csbm --nodes 600 --edges 3000 --features 64 --seed 2)
    mpi 2 "$TESSERA" "${synth[@]}" -o f32.h5 >/dev/null || exit 1
    out=$(mpi 2 "$TESSERA" "${synth[@]}" --feature-dtype bf16 -o bf16.h5) || exit 1
    grep -q "600 nodes, .* edges, 64 bf16 features" <<<"$out" || { echo "FAILED: prep said '$out'"; exit 1; }
    info=$(mpi 2 "$TESSERA" info bf16.h5) || exit 1
    grep -qF "features:  64 (stored in bf16)" <<<"$info" || { echo "FAILED: info said '$info'"; exit 1; }
    h5dump -H -d /node/features bf16.h5 | grep -q "H5T_STD_U16LE" || { echo "FAILED: not 16-bit values"; exit 1; }
    "$TESSERA" prep reorder bf16.h5 -o reordered.h5 --order degree >/dev/null || exit 1
    mpi 2 "$TESSERA" info reordered.h5 | grep -qF "(stored in bf16)" || { echo "FAILED: reorder dropped bf16"; exit 1; }
    /usr/bin/python3 - f32.h5 rounded.h5 <<'PY' || exit 1
import shutil, sys, h5py, numpy as np
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    u = f["node/features"][:].view(np.uint32).astype(np.uint64)
    f["node/features"][:] = ((((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)).view(np.float32)
PY
    for mode in "--grid 1x1x2" "--mode minibatch --grid 2x1x1x1 --batch-size 64" "--mode sampled --fanouts 5,5"; do
      a=$(mpi 2 "$TESSERA" train --data bf16.h5 $mode --epochs 3 --seed 4 | tail -n 1) || exit 1
      b=$(mpi 2 "$TESSERA" train --data rounded.h5 $mode --epochs 3 --seed 4 | tail -n 1) || exit 1
      [ "${a%% (mean*}" = "${b%% (mean*}" ] || { echo "FAILED: $mode: '$a' against '$b'"; exit 1; }
    done
    expect_error "--feature-dtype: expected f32 or bf16, got 'f16'" "x.h5*" -- \
      "$TESSERA" "${synth[@]}" --feature-dtype f16 -o x.h5
    # bf16 bits in a version 2 file, and 16-bit values without the bf16 mark: refused on every rank by name.
    cp bf16.h5 v2.h5 && "$H5_TAMPER" v2.h5 version 2 || exit 1
    expect_error "v2.h5: .*dataset /node/features holds bf16 in a version 2 file \(bf16 features are version 3\)" \
      "out-v2*" -- $MPIEXEC -n 2 "$TESSERA" train --data v2.h5 --epochs 1 --save-predictions out-v2.txt
    cp bf16.h5 unmarked.h5 && /usr/bin/python3 -c 'import h5py; h5py.File("unmarked.h5", "r+")["node/features"].attrs.__delitem__("dtype")' || exit 1
    expect_error "unmarked.h5: .*dataset /node/features must hold floats, or bf16 bits" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" info unmarked.h5 ;;
  synth_csbm_info)
    a=$(mpi 2 "$TESSERA" prep synth --kind csbm --nodes 3000 --edges 15000 --seed 5 -o a.h5) || exit 1
    mpi 3 "$TESSERA" prep synth --kind csbm --nodes 3000 --edges 15000 --seed 5 -o b.h5 >/dev/null || exit 1
    echo "$a"
    # The same seed on a different rank count gives the same file contents (h5diff compares values).
    h5diff a.h5 b.h5 || { echo "FAILED: 2-rank and 3-rank files differ"; exit 1; }
    mpi 2 "$TESSERA" info a.h5 | grep -q "valid:     yes" || exit 1 ;;
  train_multi_label)
    # A multi-label graph: info says so, train scores it in the chosen metric (the same on a 2x2x1 grid as
    # on one rank), reorder keeps it multi-label, and what does not fit it is refused with one line.
    out=$(mpi 2 "$TESSERA" prep synth --nodes 1500 --edges 7000 --classes 4 --tasks 6 --unobserved 0.1 \
          --signal 0.5 -o ml.h5) || exit 1
    grep -qF "6 tasks (multi-label)" <<<"$out" || { echo "FAILED: prep line: $out"; exit 1; }
    out=$("$TESSERA" info ml.h5) || exit 1
    echo "$out"
    grep -qE "^tasks: +6, multi-label \(1500 labeled nodes; (8[5-9]|9[0-5])\.[0-9]% of entries observed" <<<"$out" ||
      { echo "FAILED: no tasks line"; exit 1; }
    one=$("$TESSERA" train --data ml.h5 --epochs 20 --eval-every 10 --metric f1-macro --pos-weight 2 --quiet) || exit 1
    grid=$(mpi 4 "$TESSERA" train --data ml.h5 --grid 2x2x1 --epochs 20 --eval-every 10 --metric f1-macro \
           --pos-weight 2 --quiet) || exit 1
    echo "$one"; echo "$grid"
    one=$(tail -1 <<<"$one") grid=$(tail -1 <<<"$grid")
    [ "${one%%(mean*}" = "${grid%%(mean*}" ] || { echo "FAILED: the grid's result differs"; exit 1; }
    out=$("$TESSERA" train --data ml.h5 --epochs 2 --checkpoint ck) || exit 1
    grep -q "roc_auc  train" <<<"$out" || { echo "FAILED: not scored by roc_auc"; exit 1; }
    expect_error "ml.h5: --metric accuracy scores a single-label task" "p.h5" -- \
      "$TESSERA" predict --checkpoint ck --data ml.h5 --output p.h5 --metric accuracy
    "$TESSERA" prep reorder ml.h5 -o re.h5 --order rcm >/dev/null || exit 1
    "$TESSERA" info re.h5 | grep -q "tasks:     6, multi-label" || { echo "FAILED: reorder lost the tasks"; exit 1; }
    # Mini-batches: the cut on the host and the device cut (run on the host here) give the same run.
    host=$("$TESSERA" train --data ml.h5 --mode minibatch --grid 1x1x1x1 --batch-size 200 --epochs 4 \
           --sample-on host --quiet | tail -1) || exit 1
    device=$("$TESSERA" train --data ml.h5 --mode minibatch --grid 1x1x1x1 --batch-size 200 --epochs 4 \
             --sample-on device --quiet | tail -1) || exit 1
    echo "$host"; echo "$device"
    [ "${host%%(mean*}" = "${device%%(mean*}" ] || { echo "FAILED: the device cut's run differs"; exit 1; }
    # Sampled on 2 ranks: its final exact evaluation scores every node's task labels.
    out=$(mpi 2 "$TESSERA" train --data ml.h5 --mode sampled --batch-size 32 --fanouts 5,5 --epochs 3 \
          --metric f1-micro) || { echo "$out"; exit 1; }
    grep -qE "exact .*f1_micro|f1_micro.*exact" <<<"$out" || grep -q "f1_micro" <<<"$out" ||
      { echo "$out"; echo "FAILED: the sampled run is not scored by f1_micro"; exit 1; }
    expect_error "ml.h5 is multi-label: --save-predictions writes one class per node; its tasks' predictions and probabilities come from tessera predict" "p.txt" -- \
      "$TESSERA" train --data ml.h5 --save-predictions p.txt
    expect_error "--metric accuracy scores a single-label task" - -- "$TESSERA" train --data ml.h5 --metric accuracy
    expect_error "--pos-weight gives 2 weights for 6 tasks" - -- "$TESSERA" train --data ml.h5 --pos-weight 1,2
    "$TESSERA" prep synth --nodes 300 --edges 900 -o single.h5 >/dev/null || exit 1
    expect_error "--metric rocauc scores a multi-label task; a single-label graph is scored by accuracy" - -- \
      "$TESSERA" train --data single.h5 --metric rocauc
    expect_error "--pos-weight weighs the positive labels of a multi-label graph" - -- \
      "$TESSERA" train --data single.h5 --pos-weight 2
    expect_error "--metric must be auto, accuracy, rocauc, ap, f1-micro, f1-macro, hits@20, hits@50, hits@100 or mrr, not 'auc'" - -- \
      "$TESSERA" train --data single.h5 --metric auc
    expect_error "synthetic graph: --tasks must be in \[0, 2\^24\]" "bad.h5*" -- \
      "$TESSERA" prep synth --nodes 100 --edges 300 --tasks -1 -o bad.h5
    expect_error "synthetic graph: --unobserved must be in \[0, 1\)" "bad.h5*" -- \
      "$TESSERA" prep synth --nodes 100 --edges 300 --tasks 2 --unobserved 1 -o bad.h5 ;;
  prep_ogb_proteins)
    # ogbn-proteins' layout: several label columns make a multi-label graph, and without node features each
    # node's are the mean of its edges' edge-feat rows (every incident edge when symmetrized, as OGB's
    # examples make them): checked against NumPy; the graph trains, scored by ROC-AUC.
    fixture --layout proteins
    "$TESSERA" prep ogb ds -o p.h5 --symmetrize >/dev/null || exit 1
    "$TESSERA" info p.h5 | grep -q "tasks:     4, multi-label (50 labeled nodes" || { echo "FAILED: info"; exit 1; }
    /usr/bin/python3 - <<'PY' || exit 1
import gzip, h5py, numpy as np
read = lambda name: np.loadtxt(gzip.open(f"ds/raw/{name}.csv.gz"), delimiter=",", ndmin=2)
edges, feats, labels = read("edge").astype(int), read("edge-feat"), read("node-label").astype(np.int8)
sums, count = np.zeros((50, feats.shape[1])), np.zeros(50)
for (u, v), f in zip(edges, feats):
    for w in ({u, v}):
        sums[w] += f
        count[w] += 1
want = np.divide(sums, count[:, None], out=np.zeros_like(sums), where=count[:, None] > 0)
with h5py.File("p.h5") as f:
    np.testing.assert_allclose(f["node/features"][:], want, rtol=1e-6, atol=1e-7)
    assert np.array_equal(f["node/labels"][:], labels) and f.attrs["task"] in ("multi-label", b"multi-label")
    assert sorted(f["split"]) == ["test", "train", "valid"]
print("ok: features are the mean of each node's edges, labels the task matrix")
PY
    out=$("$TESSERA" train --data p.h5 --epochs 3) || exit 1
    grep -q "roc_auc  train" <<<"$out" || { echo "$out"; echo "FAILED: not scored by roc_auc"; exit 1; }
    zcat ds/raw/node-label.csv.gz | sed '7s/^./2/' | gzip > bad.gz && mv bad.gz ds/raw/node-label.csv.gz
    expect_error "node-label.csv.gz: line 7, column 1: label 2 \(a task's labels are 1, 0 or -1\)" "out.h5*" -- \
      "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_truncated_gzip)
    fixture --defect truncated-gzip
    expect_error "ds/raw/edge.csv.gz: line [0-9]+: (truncated|corrupt)" "out.h5*" -- "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_wrong_columns)
    fixture --defect wrong-columns
    expect_error "edge.csv.gz: line 10: expected 2 columns, found 3" "out.h5*" -- "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_non_numeric)
    fixture --defect non-numeric
    expect_error "edge.csv.gz: line 5, column 2: 'abc' is not an integer" "out.h5*" -- "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_id_out_of_range)
    fixture --defect id-out-of-range
    expect_error "edge.csv.gz: line 12: node id 60 out of range \[0, 50\)" "out.h5*" -- "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_nan_feature)
    fixture --defect nan-feature
    expect_error "node-feat.csv.gz: line 6, column 1: value is nan" "out.h5*" -- $MPIEXEC -n 2 "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_inf_feature)
    fixture --defect inf-feature
    expect_error "node-feat.csv.gz: line 7, column 1: value is inf" "out.h5*" -- "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_missing_split)
    fixture --defect missing-split
    expect_error "ds/split/random/test.csv.gz: missing" "out.h5*" -- "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_wrong_edge_count)
    fixture --defect wrong-edge-count
    expect_error "edge.csv.gz: 115 edges, but the dataset declares 120" "out.h5*" -- "$TESSERA" prep ogb ds -o out.h5 ;;
  bad_unwritable_output)
    fixture
    expect_error "nodir/out.h5: cannot write --output \(No such file or directory\)" "nodir" -- \
      $MPIEXEC -n 2 "$TESSERA" prep ogb ds -o nodir/out.h5
    touch plainfile
    expect_error "plainfile/out.h5: cannot write --output \(Not a directory\)" "plainfile/out.h5*" -- \
      $MPIEXEC -n 2 "$TESSERA" prep synth --nodes 100 --edges 300 -o plainfile/out.h5 ;;
  bad_not_a_dataset)
    mkdir empty
    expect_error "empty: neither raw/edge.csv.gz nor raw/data.npz found" "out.h5*" -- "$TESSERA" prep ogb empty -o out.h5 ;;
  bad_h5_version)
    good_h5; "$H5_TAMPER" g.h5 version 4 || exit 1
    expect_error "g.h5: schema version 4, this Tessera reads versions 1 to 3" "-" -- $MPIEXEC -n 2 "$TESSERA" info g.h5 ;;
  bad_h5_shape)
    good_h5; "$H5_TAMPER" g.h5 shrink /node/labels || exit 1
    expect_error "g.h5: dataset /node/labels has shape \[3\], expected \[50\]" "-" -- $MPIEXEC -n 2 "$TESSERA" info g.h5 ;;
  bad_h5_missing_dataset)
    good_h5; "$H5_TAMPER" g.h5 drop /node/features || exit 1
    expect_error "g.h5: dataset /node/features is missing" "-" -- $MPIEXEC -n 3 "$TESSERA" info g.h5 ;;
  bad_h5_label)
    good_h5; "$H5_TAMPER" g.h5 label 47 12 || exit 1
    expect_error "g.h5: dataset /node/labels: row 47 has label 12, outside \[-1, 3\)" "-" -- $MPIEXEC -n 4 "$TESSERA" info g.h5 ;;
  bad_h5_not_hdf5)
    echo "hello" > fake.h5
    expect_error "fake.h5: not an HDF5 file" "-" -- $MPIEXEC -n 2 "$TESSERA" info fake.h5 ;;
  bad_usage)
    expect_error "--nodes: Value abc not in range|could not be converted|--nodes" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" prep synth --nodes abc -o x.h5
    expect_error "A subcommand is required|subcommand" "-" -- "$TESSERA"
    # --help is the command's own (Kokkos takes only --kokkos-* arguments), and --kokkos-* still reach Kokkos.
    help=$("$TESSERA" train --help) || exit 1
    [ "$(head -n 1 <<<"$help")" = "Train a GCN, GraphSAGE or GAT model on a graph file" ] ||
      { echo "FAILED: train --help starts with: $(head -n 1 <<<"$help")"; exit 1; }
    grep -q kokkos <<<"$help" && { echo "FAILED: Kokkos' options in train --help"; exit 1; }
    "$TESSERA" train --help --kokkos-help | grep -q -E -- "--kokkos-(num-)?threads" ||
      { echo "FAILED: --kokkos-help did not reach Kokkos"; exit 1; }
    # setup.sh refuses a bad device option before it installs or builds anything (exit 2, one line).
    for bad in "--cuda-arch 70|--cuda-arch must be 80 (A100) or 90 (H100/H200), not '70'" \
               "--backend rocm|--backend must be host, cuda or hip, not 'rocm'"; do
      # shellcheck disable=SC2086
      out=$(bash "$SOURCE_DIR/scripts/setup.sh" ${bad%%|*} 2>&1); rc=$?
      [ "$rc" -eq 2 ] && [ "$out" = "setup.sh: ${bad#*|}" ] || { echo "FAILED: setup.sh ${bad%%|*}: exit $rc, '$out'"; exit 1; }
    done
    # gpu_check.sh refuses bad arguments before it looks for a GPU (exit 2, one line).
    usage="(usage: gpu_check.sh [--build-dir DIR] [--host-build DIR] [--tests REGEX|none] [EPOCHS])"
    for bad in "--build-dir|--build-dir needs a directory" \
               "--build-dir $work|--build-dir '$work' holds no apps/tessera (not a CUDA build directory)" \
               "--host-build $work|--host-build '$work' holds no apps/tessera (not a build directory)" \
               "--tests|--tests needs a regular expression or none" "--fast|unknown option '--fast'" \
               "ten|EPOCHS must be a whole number of 3 or more, not 'ten'" \
               "2|EPOCHS must be a whole number of 3 or more, not '2'" "3 4|unexpected argument '4'"; do
      # shellcheck disable=SC2086
      out=$(bash "$SOURCE_DIR/scripts/gpu_check.sh" ${bad%%|*} 2>&1); rc=$?
      [ "$rc" -eq 2 ] && [ "$out" = "gpu_check: ${bad#*|} $usage" ] ||
        { echo "FAILED: gpu_check.sh ${bad%%|*}: exit $rc, '$out'"; exit 1; }
    done
    out=$(bash "$SOURCE_DIR/scripts/fuzz.sh" 10m 2>&1); rc=$?
    [ "$rc" -eq 2 ] && [ "$out" = "fuzz.sh: SECONDS must be a whole number, not '10m'" ] ||
      { echo "FAILED: fuzz.sh 10m: exit $rc, '$out'"; exit 1; }
    exit 0 ;;
  abort_local_error)
    # Rank 1 fails while rank 0 waits in a barrier: the job must end (timeout = hang) with a non-zero code.
    expect_error "probe: rank-local failure \(rank 1\)" "-" -- timeout 60 $MPIEXEC -n 2 "$ABORT_PROBE" local ;;
  abort_collective_error)
    out=$(bash "$here/expect_error.sh" "probe: the last rank disagrees" "-" -- timeout 60 $MPIEXEC -n 3 "$ABORT_PROBE" collective) \
      || { echo "$out"; exit 1; }
    echo "$out"
    [ "$(grep -c 'tessera: error:' <<<"$out")" -eq 1 ] || { echo "FAILED: expected exactly one error line"; exit 1; }
    grep -q "MPI_ABORT" <<<"$out" && { echo "FAILED: a collective error should not abort"; exit 1; }
    exit 0 ;;
  train_cora_main_options)
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: $SHARED_DIR/datasets/cora is absent"; exit 77; }
    "$TESSERA" prep ogb "$SHARED_DIR/datasets/cora" -o cora.h5 --symmetrize >/dev/null || exit 1
    out=$("$TESSERA" train --data cora.h5 --model gcn --layers 2 --hidden 16 --dropout 0.5 --lr 0.01 --weight-decay 5e-4 \
      --epochs 200 --normalize-features --metrics m.jsonl --save-predictions pred.txt --checkpoint . --checkpoint-every 50) || exit 1
    echo "$out" | tail -n 3
    [ "$(grep -c '^epoch' <<<"$out")" -eq 200 ] || { echo "FAILED: expected 200 epoch lines"; exit 1; }
    [ "$(grep -c "\"kind\":\"epoch\"" m.jsonl)" -eq 200 ] && [ "$(head -n 1 m.jsonl | grep -c "\"kind\":\"header\"")" -eq 1 ] && [ "$(wc -l < pred.txt)" -eq 2708 ] && [ -f checkpoint.h5 ] || { echo "FAILED: outputs"; exit 1; }
    acc=$(grep -o 'test 0\.[0-9]*' <<<"$(tail -n 1 <<<"$out")" | cut -d' ' -f2)
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.79) }' || { echo "FAILED: test accuracy $acc"; exit 1; } ;;
  bad_train_layers)
    good_h5
    expect_error "--layers must be in \[1, 256\], not 0" "-" -- "$TESSERA" train --data g.h5 --layers 0
    expect_error "--profile-kernels leaves the first epoch out and needs --epochs 2 or more, not 1" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 1 --profile-kernels
    expect_error "TESSERA_MPI_CHUNK_BYTES must be a positive number of bytes, not '4k'" "-" -- \
      env TESSERA_MPI_CHUNK_BYTES=4k $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 1 ;;
  bad_train_no_labels)
    good_h5; cp g.h5 nolabels.h5; "$H5_TAMPER" nolabels.h5 drop /node/labels || exit 1
    expect_error "nolabels.h5: dataset /node/labels is missing" "-" -- "$TESSERA" train --data nolabels.h5 --epochs 2
    "$TESSERA" prep synth --nodes 100 --edges 300 --train-fraction 0 -o notrain.h5 >/dev/null || exit 1
    expect_error "notrain.h5: no labeled node in split 'train'" "-" -- "$TESSERA" train --data notrain.h5 --epochs 2 ;;
  bad_train_checkpoint_shape)
    good_h5; mkdir ck
    "$TESSERA" train --data g.h5 --epochs 3 --hidden 8 --checkpoint ck --quiet >/dev/null || exit 1
    expect_error "ck/checkpoint.h5: written for model gcn 2x8 \(in 6, out 3, norm none\), but this run builds gcn 2x32" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 6 --hidden 32 --checkpoint ck --resume ;;
  bad_train_checkpoint_corrupt)
    good_h5; mkdir ck
    "$TESSERA" train --data g.h5 --epochs 3 --checkpoint ck --quiet >/dev/null || exit 1
    head -c 2000 ck/checkpoint.h5 > ck/cut && mv ck/cut ck/checkpoint.h5
    expect_error "ck/checkpoint.h5: cannot open the checkpoint" "-" -- "$TESSERA" train --data g.h5 --epochs 6 --checkpoint ck --resume
    rm ck/checkpoint.h5
    expect_error "ck/checkpoint.h5: no checkpoint to resume from" "-" -- "$TESSERA" train --data g.h5 --epochs 6 --checkpoint ck --resume
    # The selection's running bests (--selection accuracy-and-loss) are checked where they are read.
    "$TESSERA" train --data g.h5 --epochs 3 --checkpoint ck --quiet >/dev/null || exit 1
    py=python3; $py -c 'import h5py' 2>/dev/null || py=/usr/bin/python3
    $py -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); f.attrs["min_valid_loss"] = float("nan")' \
      ck/checkpoint.h5 || exit 1
    expect_error "ck/checkpoint.h5: checkpoint records a highest validation accuracy of .* and a lowest validation loss of nan \(corrupt file\?\)" \
      "-" -- "$TESSERA" train --data g.h5 --epochs 6 --checkpoint ck --resume ;;
  bad_train_multirank)
    good_h5
    out=$($MPIEXEC -n 2 "$TESSERA" train --data g.h5 --epochs 2 2>&1) || { echo "$out"; echo "FAILED: 2 ranks without --grid"; exit 1; }
    grep -q "no --grid on 2 ranks: picking one as --grid auto" <<<"$out" && grep -qE "^grid auto: [0-9]+x[0-9]+x[0-9]+" <<<"$out" ||
      { echo "$out"; echo "FAILED: no grid picked"; exit 1; }
    expect_error "grid 2x2x1 has 4 ranks but the job has 2" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --epochs 2 --grid 2x2x1
    expect_error "grid '0x2x1': every axis must be at least 1" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --epochs 2 --grid 0x2x1
    "$TESSERA" prep synth --nodes 3 --edges 3 --classes 1 --train-fraction 1 --valid-fraction 0 -o three.h5 >/dev/null || exit 1
    expect_error "grid 1x1x4 has more ranks than the graph has nodes \(3\)" "-" -- \
      $MPIEXEC -n 4 "$TESSERA" train --data three.h5 --epochs 2 --grid 1x1x4 ;;
  bad_train_minibatch)
    good_h5
    expect_error "--mode minibatch needs --batch-size" "-" -- "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x1
    expect_error "--batch-size is for --mode minibatch / sampled, not --mode full" "-" -- "$TESSERA" train --data g.h5 --batch-size 10
    expect_error "--mode: expected full, minibatch or sampled, got 'mini'" "-" -- "$TESSERA" train --data g.h5 --mode mini
    expect_error "--batch-size: expected a count or a fraction of the nodes, got 'half'" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 2x1x1x1 --batch-size half
    expect_error "--batch-size 100000 gives 100000 nodes; it must be between 2 and the graph's [0-9]+" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x2 --batch-size 100000
    expect_error "--grid 2x2x1x1 has 4 ranks but the job has 2" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 2x2x1x1 --batch-size 10
    expect_error "--comm-dtype: expected f32 or bf16, got 'fp8'" "-" -- "$TESSERA" train --data g.h5 --comm-dtype fp8
    expect_error "--gemm-dtype: expected f32 or bf16, got 'fp8'" "-" -- "$TESSERA" train --data g.h5 --gemm-dtype fp8
    expect_error "--activation-dtype: expected f32 or bf16, got 'fp16'" "-" -- "$TESSERA" train --data g.h5 --activation-dtype fp16
    expect_error "tessera: error: --activation-dtype bf16 is for --model gcn / sage" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --model gat --activation-dtype bf16 --epochs 1
    expect_error "--gemm-dtype bf16 is for the host GEMM path \\(oneDNN\\); --kernels team runs GEMMs on the team path" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --gemm-dtype bf16 --kernels team --epochs 1
    expect_error "--kernels must be auto, host, team or vendor, not 'gpu'" "-" -- "$TESSERA" train --data g.h5 --kernels gpu
    expect_error "--host-gemm must be auto, blas or onednn, not 'mkl'" "-" -- "$TESSERA" train --data g.h5 --host-gemm mkl
    "$TESSERA" train --data g.h5 --epochs 2 --host-gemm blas --quiet >/dev/null || { echo "FAILED: --host-gemm blas"; exit 1; }
    expect_error "kernel path 'vendor' has no SpMM kernel in this build" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --kernels vendor --epochs 1
    expect_error "--comm must be auto, mpi, mpi-host or nccl, not 'rccl'" "-" -- "$TESSERA" train --data g.h5 --comm rccl
    expect_error "--comm nccl: this build has no NCCL" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --comm nccl --epochs 1
    expect_error "--patience must not be negative, not -1" "-" -- "$TESSERA" train --data g.h5 --patience -1
    expect_error "--lr must be finite and not negative, not nan" "-" -- "$TESSERA" train --data g.h5 --lr nan
    expect_error "--lr must be finite and not negative, not -1" "-" -- "$TESSERA" train --data g.h5 --lr -1
    expect_error "--weight-decay must be finite and not negative, not -1" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --weight-decay -1
    # Divergence stops the run in the epoch where it happens, on every rank, before that epoch is recorded,
    # saved or written out: the message names the last checkpoint, which stays as it was.
    mkdir -p ck
    expect_error "diverged at epoch 1: the validation loss is -?(nan|inf) \(try a smaller --lr\); stopped before anything of this epoch was recorded or saved \(no checkpoint was written\)" "ck/checkpoint.h5" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --lr 1e38 --epochs 5 --checkpoint ck --checkpoint-every 1 \
      --save-predictions p.txt --metrics m.jsonl
    [ ! -e p.txt ] && ! grep -q '"epoch":1' m.jsonl || { echo "FAILED: the diverged epoch was recorded"; exit 1; }
    $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 1 --checkpoint ck --quiet >/dev/null || exit 1
    cp ck/checkpoint.h5 epoch1.h5 || exit 1
    expect_error "diverged at epoch 2: .* the last checkpoint, ck/checkpoint.h5 after epoch 1, is unchanged" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --lr 1e38 --epochs 5 --checkpoint ck --checkpoint-every 1 \
      --resume --resume-force
    expect_error "diverged at epoch 1: (the training loss is -?(nan|inf) at step [0-9]|the validation loss|parameters hold)" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 2x1x1x1 --batch-size 10 --steps-per-epoch 4 \
      --lr 1e38 --epochs 2
    cmp ck/checkpoint.h5 epoch1.h5 || { echo "FAILED: the checkpoint changed"; exit 1; }
    expect_error "nodir/p.txt: cannot write --save-predictions \(No such file or directory\)" "nodir" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x2 --batch-size 10 --save-predictions nodir/p.txt
    expect_error "nodir/e.h5: cannot write --save-embeddings \(No such file or directory\)" "nodir" -- \
      "$TESSERA" train --data g.h5 --save-embeddings nodir/e.h5 ;;
  bad_train_sampled)
    good_h5
    expect_error "--parts 1000 is more than the graph's [0-9]+ nodes" "-" -- "$TESSERA" partition --data g.h5 --parts 1000
    expect_error "--method must be metis or random, not 'best'" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" partition --data g.h5 --parts 2 --method best
    out=$($MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode sampled --epochs 1 2>&1) || { echo "$out"; exit 1; }
    grep -qF "no partition metis-2 in g.h5: using block" <<<"$out" || { echo "$out"; echo "FAILED: no fallback line"; exit 1; }
    # --comm-dtype bf16 changes nothing here (a sampled step's layers multiply on the rank's own blocks),
    # and the run's first line says so.
    out16=$($MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode sampled --epochs 1 --comm-dtype bf16 2>&1) ||
      { echo "$out16"; exit 1; }
    head -n 1 <<<"$out16" | grep -qF "comm: bf16 asked, but a sampled step's layers multiply" ||
      { echo "$out16"; echo "FAILED: no comm line first"; exit 1; }
    epochs() { grep -E "^epoch " <<<"$1" | sed -E 's/  [0-9.]+ ms.*//'; }
    [ -n "$(epochs "$out")" ] && [ "$(epochs "$out")" = "$(epochs "$out16")" ] ||
      { epochs "$out"; epochs "$out16"; echo "FAILED: --comm-dtype bf16 changed a sampled run"; exit 1; }
    # The worker thread as chosen: auto says why; on and off as asked.
    grep -Eq "worker thread (on|off) \(auto: 2 ranks' [0-9]+ threads? (fill|leave|on the)" <<<"$out" ||
      { echo "$out"; echo "FAILED: no worker-thread choice"; exit 1; }
    out=$($MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode sampled --epochs 1 --prefetch-thread on 2>&1) || { echo "$out"; exit 1; }
    grep -qF "worker thread on (as asked)" <<<"$out" || { echo "$out"; echo "FAILED: --prefetch-thread on"; exit 1; }
    expect_error "--prefetch-thread must be auto, on or off, not 'maybe'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --prefetch-thread maybe
    expect_error "--no-prefetch-thread and --prefetch-thread on contradict each other: give one" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --prefetch-thread on --no-prefetch-thread
    expect_error "g.h5: no partition 'metis-2' \(make it with: tessera partition --data g.h5 --parts 2" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2
    "$TESSERA" partition --data g.h5 --parts 3 --method random >/dev/null || exit 1
    expect_error "partition 'random-3' has 3 parts but the job runs on 2 ranks" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode sampled --partition random-3
    expect_error "--fanouts lists 3 layers but the model has 2" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --fanouts 5,5,5
    expect_error "--fanouts: expected positive integers" "-" -- "$TESSERA" train --data g.h5 --mode sampled --fanouts 5,x
    expect_error "--prefetch-policy must be none, static, periodic, adaptive or external, not 'lru'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --prefetch-policy lru
    expect_error "--prefetch-policy external needs --prefetch-agent CMD" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --prefetch-policy external
    expect_error "--prefetch-fraction must be in \[0, 1\], not 2" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --prefetch-fraction 2
    expect_error "--feature-dtype: expected f32 or bf16, got 'f16'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --feature-dtype f16
    expect_error "--sample-on device gathers fp32 feature rows; --feature-dtype bf16 runs with --sample-on host" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --feature-dtype bf16 --sample-on device
    expect_error "--cache-size and --prefetch-fraction both size the cache: give one of them" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --cache-size 1M --prefetch-fraction 0.3
    expect_error "--cache-size: expected a size such as 4G, 512M or 1000000 \(bytes\), not '3X'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --cache-size 3X
    expect_error "--cache-size must be more than 0 bytes, not '0'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --cache-size 0
    expect_error "--simulate-network: expected LAT_US,GBPS" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --simulate-network 25
    expect_error "--batch-size: --mode sampled takes a count of seeds per rank from 1 to 2\^30, not '0.5'" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --batch-size 0.5
    touch ck
    expect_error "ck: --checkpoint names a file, not a directory" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --checkpoint ck ;;
  train_cora_sampled)
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: $SHARED_DIR/datasets/cora is absent"; exit 77; }
    "$TESSERA" prep ogb "$SHARED_DIR/datasets/cora" -o cora.h5 --symmetrize >/dev/null || exit 1
    part=$(mpi 4 "$TESSERA" partition --data cora.h5 --parts 4) || exit 1
    echo "$part"
    grep -Eq "wrote /partition/metis-4 to cora.h5: 4 parts \(metis\), edge cut [0-9]+ of 10556 edges" <<<"$part" ||
      { echo "FAILED: partition report"; exit 1; }
    out=$(mpi 4 "$TESSERA" train --data cora.h5 --mode sampled --model sage --fanouts 10,10 --batch-size 32 \
      --epochs 30 --normalize-features --eval-every 10 --prefetch-policy adaptive --prefetch-interval 4 \
      --metrics m.jsonl --details-every 10) || exit 1
    echo "$out"
    grep -q "partition metis-4" <<<"$out" || { echo "FAILED: no partition in the load line"; exit 1; }
    grep -q "cache hit rate" <<<"$out" || { echo "FAILED: no cache report"; exit 1; }
    test=$(tail -n 1 <<<"$out" | sed -E 's/.*test ([0-9.]+).*/\1/')
    python3 -c "import sys; sys.exit(0 if float('$test') > 0.70 else 1)" || { echo "FAILED: test accuracy $test"; exit 1; }
    for key in '"kind":"step"' '"hit_rate"' '"fetched_bytes"' '"fetch_s"' '"evictions"' '"controller":"adaptive"' \
      '"remote_rows"' '"policy":"adaptive"'; do
      grep -qF "$key" m.jsonl || { echo "FAILED: no $key in the metrics"; exit 1; }
    done
    steps=$(grep -c '"kind":"step"' m.jsonl)
    [ "$steps" -gt 30 ] || { echo "FAILED: $steps step lines"; exit 1; }
    # The blocks a step's floor is computed from (scripts/sampled_floor.py): each layer's destinations are
    # the next layer's sources, at most 10 kept neighbours a destination, at most 32 seeds; the timings
    # nest (the fetch is part of the gather).
    python3 - m.jsonl <<'PY' || { echo "FAILED: the epoch records' blocks and timings"; exit 1; }
import json, sys
epochs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "epoch"]
assert len(epochs) == 30, len(epochs)
for r in epochs:
    b = r["blocks"]
    assert len(b) == 2, b
    assert b[0]["dst"] == b[1]["src"], b
    assert 0 < b[1]["dst"] <= 32, b
    for layer in b:
        assert layer["dst"] <= layer["src"] and 0 < layer["nnz"] <= 10 * layer["dst"], b
    assert 0 <= r["fetch_s"] <= r["gather_s"] and r["upload_s"] >= 0 and r["sample_s"] > 0, r
PY
    echo "ok" ;;
  train_cora_minibatch)
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: $SHARED_DIR/datasets/cora is absent"; exit 77; }
    "$TESSERA" prep ogb "$SHARED_DIR/datasets/cora" -o cora.h5 --symmetrize >/dev/null || exit 1
    out=$($MPIEXEC -n 4 "$TESSERA" train --data cora.h5 --epochs 60 --normalize-features --mode minibatch \
      --grid 2x1x1x2 --batch-size 0.5 --comm-dtype bf16 --norm batch --eval-every 20 --metrics m.jsonl --verbose \
      --profile-kernels) || exit 1
    echo "$out"
    grep -q "mini-batches of 1354 of 2708 vertices" <<<"$out" || { echo "FAILED: batch size line"; exit 1; }
    # What runs in bf16: the run's first line.
    head -n 1 <<<"$out" | grep -qF "comm: the multiply's all-reduces send bf16" ||
      { echo "FAILED: the first line does not name bf16 all-reduces"; exit 1; }
    # The kernel profile: rank 0's kernels over epochs 2-60, the optimizer's among them.
    grep -q "^kernel profile, rank 0 (wall time per epoch, mean of 59)" <<<"$out" &&
      grep -Eq "^ +[0-9.]+ +[0-9.]+ +[0-9.]+  tessera::adam$" <<<"$out" &&
      grep -Eq "^ +[0-9.]+ ms per epoch in [0-9]+ kernels, copies and vendor calls; measured epoch [0-9.]+ ms" \
        <<<"$out" && grep -Eq "^  allocations [0-9.]+ per epoch, [0-9.]+ MB \(Kokkos Views and scratch" <<<"$out" ||
      { echo "FAILED: kernel profile lines"; exit 1; }
    grep -q "trainer waited" <<<"$out" || { echo "FAILED: no sampling report"; exit 1; }
    test=$(tail -n 1 <<<"$out" | sed -E 's/.*test ([0-9.]+).*/\1/')
    python3 -c "import sys; sys.exit(0 if float('$test') > 0.70 else 1)" || { echo "FAILED: test accuracy $test"; exit 1; }
    for key in '"sample_s"' '"sample_wait_s"' '"bytes_allreduce"' '"steps":1'; do
      grep -qF "$key" m.jsonl || { echo "FAILED: no $key in the metrics"; exit 1; }
    done
    # The load's phases: on the console, and in the first epoch's record only, with growing peaks.
    grep -Eq "^load phases .*: read [0-9.]+ s [0-9]+ MiB; labels .*; adjacency 0 .*; adjacency 1 .*; features [0-9.]+ s [0-9]+ MiB$" \
      <<<"$out" || { echo "FAILED: no load phases line"; exit 1; }
    python3 - m.jsonl <<'PY' || { echo "FAILED: load phases in the metrics"; exit 1; }
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "epoch"]
phases = rows[0]["load_phases"]
assert [p["phase"] for p in phases] == ["read", "labels", "degrees", "adjacency 0", "adjacency 1", "features"], phases
peaks = [p["peak_bytes"] for p in phases]
assert all(b > 0 for b in peaks) and peaks == sorted(peaks), peaks
assert all(p["s"] >= 0 for p in phases)
assert not any("load_phases" in r for r in rows[1:])
PY
    ;;
  train_cora_grid)
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: $SHARED_DIR/datasets/cora is absent"; exit 77; }
    "$TESSERA" prep ogb "$SHARED_DIR/datasets/cora" -o cora.h5 --symmetrize >/dev/null || exit 1
    one=$("$TESSERA" train --data cora.h5 --epochs 200 --normalize-features --quiet | tail -n 1) || exit 1
    # --comm mpi-host: every device collective through host copies, as device builds without NCCL or a
    # device-aware MPI run them.
    grid=$($MPIEXEC -n 4 "$TESSERA" train --data cora.h5 --epochs 200 --normalize-features --quiet --grid 2x1x2 \
      --metrics m.jsonl --save-predictions pred.txt --comm mpi-host | tail -n 1) || exit 1
    echo "1 rank:    $one"; echo "2x1x2 grid (mpi-host): $grid"
    [ "${one%% (mean*}" = "${grid%% (mean*}" ] || { echo "FAILED: the grid run differs from the one-rank run"; exit 1; }
    [ "$(wc -l < pred.txt)" -eq 2708 ] && ! grep -q -- '-1' pred.txt || { echo "FAILED: predictions"; exit 1; }
    grep -q '"bytes_allreduce"' m.jsonl || { echo "FAILED: no communication bytes in the metrics"; exit 1; }
    for phase in '"spmm":{"max_over_mean"' '"gemm":{"max_over_mean"' '"forward allreduce a":{' '"loss":{'; do
      grep -qF "$phase" m.jsonl || { echo "FAILED: no per-phase timing $phase in the metrics"; exit 1; }
    done
    # GraphSAGE too: its root term rides the grid's collectives (a self block per layer).
    one=$("$TESSERA" train --data cora.h5 --model sage --epochs 200 --normalize-features --quiet | tail -n 1) || exit 1
    grid=$($MPIEXEC -n 4 "$TESSERA" train --data cora.h5 --model sage --epochs 200 --normalize-features --quiet \
      --grid 2x2x1 | tail -n 1) || exit 1
    echo "sage 1 rank:     $one"; echo "sage 2x2x1 grid: $grid"
    [ "${one%% (mean*}" = "${grid%% (mean*}" ] || { echo "FAILED: the SAGE grid run differs from one rank"; exit 1; } ;;
  train_config)
    good_h5
    printf 'data = "g.h5"\nhidden = 8\nepochs = 3\nquiet = true\nmetrics = "m.jsonl"\nmodel = "sage"\n' > run.toml
    out=$("$TESSERA" train --config run.toml --epochs 5) || exit 1
    echo "$out"
    [ "$(grep -c "\"kind\":\"epoch\"" m.jsonl)" -eq 5 ] || { echo "FAILED: the command line's --epochs 5 should win over the file's 3"; exit 1; }
    "$TESSERA" train --config run.toml --print-config > effective.toml || exit 1
    cat effective.toml
    for want in 'data="g.h5"' 'hidden=8' 'epochs=3' 'model="sage"' 'lr=0.01'; do
      grep -qF "$want" effective.toml || { echo "FAILED: --print-config lacks $want"; exit 1; }
    done
    rm m.jsonl
    "$TESSERA" train --config effective.toml >/dev/null || exit 1
    [ "$(grep -c "\"kind\":\"epoch\"" m.jsonl)" -eq 3 ] || { echo "FAILED: the printed configuration does not reproduce the run"; exit 1; }
    printf '[train]\ndata = "g.h5"\nepochs = 2\nquiet = true\n' > section.toml
    "$TESSERA" train --config section.toml | grep -q "after 2 epochs" || { echo "FAILED: [train] section"; exit 1; }
    printf 'data = "g.h5"\nbogus = 3\n' > bad.toml
    expect_error "bad.toml: line 2: unknown option 'bogus'" "-" -- $MPIEXEC -n 2 "$TESSERA" train --config bad.toml
    expect_error "missing.toml: cannot read the configuration file" "-" -- "$TESSERA" train --config missing.toml ;;
  h5py_defaults)
    # A graph file whose string attributes h5py wrote with its defaults (variable-length UTF-8) reads and trains.
    good_h5
    py=python3; $py -c 'import h5py' 2>/dev/null || py=/usr/bin/python3
    $py -c 'import h5py' 2>/dev/null || { echo "skipped: no python3-h5py (scripts/setup.sh installs it)"; exit 77; }
    $py - g.h5 <<'PY' || exit 1
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    for key in ("format", "name", "source"):
        value = f.attrs[key]
        value = value.decode() if isinstance(value, bytes) else str(value)
        del f.attrs[key]
        f.attrs[key] = value  # h5py's default: a variable-length UTF-8 string
PY
    h5dump -A g.h5 | grep -q H5T_CSET_UTF8 || { echo "FAILED: h5py did not write UTF-8 attributes"; exit 1; }
    mpi 2 "$TESSERA" info g.h5 | grep -q "valid:     yes" || { echo "FAILED: info"; exit 1; }
    mpi 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 2 | tail -n 1 | grep -q "best valid" || exit 1
    # An array where one value belongs (HDF5 would write all of it into the one value's place).
    $py - g.h5 <<'PY' || exit 1
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs["num_nodes"] = [50, 50]
PY
    expect_error "g.h5: root attribute 'num_nodes' is missing or not one integer" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 1
    # A size whose n + 1 overflows int64 (found by the fuzzer: undefined behaviour before).
    $py - g.h5 <<'PY' || exit 1
import sys, h5py, numpy
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs["num_nodes"] = numpy.int64(2**63 - 1)
PY
    expect_error "g.h5: root attributes give impossible sizes \(num_nodes 9223372036854775807," "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 1 ;;
  bad_train_tampered)
    # Issue 14: every damage of the tamper corpus, through every mode and partition.
    good_h5
    "$TESSERA" partition --data g.h5 --parts 2 --method random >/dev/null || exit 1
    for damage in "version 4|schema version 4, this Tessera reads versions 1 to 3" \
                  "shrink /node/labels|dataset /node/labels has shape \[3\], expected \[50\]" \
                  "drop /node/features|dataset /node/features is missing" \
                  "set /graph/indptr 10 0|dataset /graph/indptr: decreases at row 9" \
                  "feature 9 2 nan|dataset /node/features: row 9, column 2 is nan" \
                  "label 7 12|dataset /node/labels: row 7 has label 12, outside \[-1, 3\)" \
                  "set /graph/indices 5 999|dataset /graph/indices: entry 5 \(row [0-9]+\) is node 999, outside \[0, 50\)" \
                  "set /split/train 3 -4|dataset /split/train: entry 3 is node -4, outside \[0, 50\)" \
                  "copy /split/train 1 /split/train 4|dataset /split/train: node [0-9]+ is listed twice" \
                  "copy /split/train 0 /split/test 2|dataset /split/(test|train): node [0-9]+ is also in /split/(train|test)"; do
      cp g.h5 bad.h5
      # shellcheck disable=SC2086
      "$H5_TAMPER" bad.h5 ${damage%%|*} || exit 1
      message="bad.h5: ${damage#*|}"
      expect_error "$message" "-" -- "$TESSERA" train --data bad.h5 --epochs 1
      expect_error "$message" "-" -- $MPIEXEC -n 2 "$TESSERA" train --data bad.h5 --grid 2x1x1 --epochs 1
      expect_error "$message" "-" -- \
        $MPIEXEC -n 2 "$TESSERA" train --data bad.h5 --mode minibatch --grid 2x1x1x1 --batch-size 10 --epochs 1
      expect_error "$message" "-" -- \
        $MPIEXEC -n 2 "$TESSERA" train --data bad.h5 --mode sampled --partition random-2 --epochs 1
      expect_error "$message" "-" -- $MPIEXEC -n 2 "$TESSERA" partition --data bad.h5 --parts 2
    done
    # Splits of 4 and 2 ids on 8 ranks: most ranks read no id and own no listed node, yet enter every exchange.
    "$TESSERA" prep synth --nodes 40 --edges 100 --train-fraction 0.1 --valid-fraction 0.05 -o tiny.h5 >/dev/null || exit 1
    mpi 8 "$TESSERA" info tiny.h5 | grep -q "valid:     yes" || { echo "FAILED: tiny.h5 on 8 ranks"; exit 1; }
    "$H5_TAMPER" tiny.h5 copy /split/valid 1 /split/valid 0 || exit 1
    expect_error "tiny.h5: dataset /split/valid: node [0-9]+ is listed twice" "-" -- timeout 120 $MPIEXEC -n 8 "$TESSERA" info tiny.h5
    expect_error "tiny.h5: dataset /split/valid: node [0-9]+ is listed twice" "-" -- \
      timeout 120 $MPIEXEC -n 8 "$TESSERA" train --data tiny.h5 --grid 2x2x2 --epochs 1 ;;
  signal_checkpoint_resume)
    # Slurm's --signal / scancel reach the ranks: one rank's signal stops all at the epoch end with a
    # checkpoint and exit 75; the resumed run ends bit-identical to one that was never interrupted. 500 short
    # epochs, the signal sent at epoch 2: it must land while training runs (after, the default action ends
    # the rank), and 200 epochs once passed between an "epoch 3" line and the kill on a loaded machine.
    good_h5
    interrupted() {  # NAME SIGNAL ARGS...
      local name=$1 sig=$2; shift 2
      local full="full-$name-$$" part="part-$name-$$" rc epoch
      mkdir "$full" "$part"
      mpi 4 "$TESSERA" train --data g.h5 --epochs 500 --quiet --checkpoint "$full" "$@" >/dev/null ||
        { echo "FAILED: $name uninterrupted run"; exit 1; }
      : >run.txt  # emptied before the launch: the wait below must not read an earlier run's lines
      mpi 4 "$TESSERA" train --data g.h5 --epochs 500 --checkpoint "$part" "$@" >run.txt 2>&1 &
      local job=$!
      wait_for_line run.txt "^epoch +1 " 120 || { cat run.txt; echo "FAILED: $name never reached epoch 1"; exit 1; }
      local target
      target=$(rank_pids "$part" | tail -n 1)  # looked up first: the signal must land well before the end
      wait_for_line run.txt "^epoch +2 " 120 || { cat run.txt; echo "FAILED: $name never reached epoch 2"; exit 1; }
      kill -"$sig" "$target"
      wait $job; rc=$?
      grep -E "^stopped|^tessera" run.txt
      [ "$rc" -eq 75 ] || { cat run.txt; echo "FAILED: $name exit $rc, expected 75"; exit 1; }
      epoch=$(grep -oE "^stopped by SIG$sig after epoch [0-9]+: $part/checkpoint.h5 written; continue with --resume" run.txt |
        grep -oE "epoch [0-9]+" | cut -d' ' -f2)
      [ -n "$epoch" ] && [ "$epoch" -lt 500 ] || { echo "FAILED: $name stop line"; exit 1; }
      mpi 4 "$TESSERA" train --data g.h5 --epochs 500 --checkpoint "$part" --resume "$@" >resumed.txt 2>&1 ||
        { cat resumed.txt; echo "FAILED: $name resume"; exit 1; }
      grep -q "resumed from $part/checkpoint.h5 after epoch $epoch" resumed.txt || { echo "FAILED: $name resume line"; exit 1; }
      h5diff "$full/checkpoint.h5" "$part/checkpoint.h5" || { echo "FAILED: $name differs from the uninterrupted run"; exit 1; }
      echo "ok: $name stopped by SIG$sig after epoch $epoch, resumed, identical"
    }
    interrupted 3d USR1 --grid 2x2x1
    interrupted minibatch TERM --mode minibatch --grid 2x1x1x2 --batch-size 20 --norm batch ;;
  kill_rank_ends_job)
    # A rank killed mid-epoch ends the whole job (no rank left waiting) and the last checkpoint still loads.
    good_h5
    ck="ck-kill-$$"; mkdir "$ck"
    : >run.txt  # emptied before the launch: the wait below must not read an earlier run's lines
    mpi 4 "$TESSERA" train --data g.h5 --grid 2x2x1 --epochs 100000 --checkpoint "$ck" --checkpoint-every 3 >run.txt 2>&1 &
    job=$!
    wait_for_line run.txt "^epoch +30 " 120 || { cat run.txt; echo "FAILED: never reached epoch 30"; exit 1; }
    kill -KILL "$(rank_pids "$ck" | tail -n 1)"
    start=$SECONDS
    while kill -0 $job 2>/dev/null && [ $((SECONDS - start)) -lt 30 ]; do sleep 0.1; done
    if kill -0 $job 2>/dev/null; then
      pkill -KILL -f -- "$ck"; echo "FAILED: the job still runs 30 s after a rank was killed"; exit 1
    fi
    wait $job && { echo "FAILED: exit 0 after a rank was killed"; exit 1; }
    echo "ok: the job ended $((SECONDS - start)) s after the kill"
    out=$(mpi 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 1 --checkpoint "$ck" --resume) || { echo "$out"; exit 1; }
    epoch=$(grep -oE "resumed from $ck/checkpoint.h5 after epoch [0-9]+" <<<"$out" | grep -oE "[0-9]+$")
    [ -n "$epoch" ] && [ $((epoch % 3)) -eq 0 ] || { echo "$out"; echo "FAILED: resume"; exit 1; }
    echo "ok: resumed from the checkpoint of epoch $epoch" ;;
  checkpoint_disk_full)
    # A checkpoint write that runs out of disk leaves the previous checkpoint usable and no temporary file.
    good_h5; mkdir ck small
    "$TESSERA" train --data g.h5 --epochs 5 --checkpoint ck --quiet >/dev/null || exit 1
    size=$(stat -c %s ck/checkpoint.h5)
    mount -t tmpfs -o size=$((size * 3 / 2)) tmpfs small 2>/dev/null ||
      { echo "skipped: cannot mount a small tmpfs here (needs root)"; exit 77; }
    trap 'umount small' EXIT
    cp ck/checkpoint.h5 small/ || exit 1
    expect_error "small/checkpoint.h5: writing the checkpoint failed .*the previous checkpoint is unchanged" "small/*.tmp-*" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 8 --checkpoint small --resume
    cmp ck/checkpoint.h5 small/checkpoint.h5 || { echo "FAILED: the previous checkpoint changed"; exit 1; }
    out=$("$TESSERA" train --data g.h5 --epochs 5 --checkpoint small --resume) || { echo "$out"; exit 1; }
    grep -q "resumed from small/checkpoint.h5 after epoch 5" <<<"$out" || { echo "FAILED: resume"; exit 1; } ;;
  train_outputs_every_mode)
    good_h5
    mpi 2 "$TESSERA" partition --data g.h5 --parts 2 >/dev/null || exit 1
    nodes=$(h5dump -H -d /node/labels g.h5 | grep -oE 'DATASPACE  SIMPLE \{ \( [0-9]+' | grep -oE '[0-9]+$')
    run() {  # MODE RANKS ARGS...: checkpoint, predictions and embeddings, then a resume
      local name=$1 ranks=$2; shift 2
      rm -rf ck && mkdir ck
      out=$(mpi "$ranks" "$TESSERA" train --data g.h5 --hidden 12 --epochs 4 --checkpoint ck --save-predictions p.txt \
        --save-embeddings e.h5 "$@") || { echo "$out"; echo "FAILED: $name"; exit 1; }
      [ -f ck/checkpoint.h5 ] || { echo "FAILED: $name wrote no checkpoint"; exit 1; }
      [ "$(wc -l < p.txt)" -eq "$nodes" ] || { echo "FAILED: $name predictions"; exit 1; }
      grep -qvE '^[0-2]$' p.txt && { echo "FAILED: $name predicted a class outside [0, 3)"; exit 1; }
      h5dump -H -d /embeddings e.h5 | grep -qF "( $nodes, 12 )" || { echo "FAILED: $name embeddings shape"; exit 1; }
      out=$(mpi "$ranks" "$TESSERA" train --data g.h5 --hidden 12 --epochs 6 --checkpoint ck --resume "$@") ||
        { echo "$out"; echo "FAILED: $name resume"; exit 1; }
      grep -q "resumed from ck/checkpoint.h5 after epoch 4" <<<"$out" && grep -q "^epoch    6" <<<"$out" ||
        { echo "$out"; echo "FAILED: $name resume"; exit 1; }
      echo "ok: $name"
    }
    run "one rank" 1
    run "3D grid sage" 2 --grid 1x2x1 --model sage
    run "minibatch" 2 --mode minibatch --grid 2x1x1x1 --batch-size 0.5 --norm batch
    run "sampled sage" 2 --mode sampled --model sage --batch-size 4
    # Written in pieces past the MPI chunk limit (7 bytes here: several rounds per rank, a different number on
    # each), the predictions are the same file.
    cp p.txt whole.txt
    TESSERA_MPI_CHUNK_BYTES=7 mpi 2 "$TESSERA" train --data g.h5 --hidden 12 --epochs 4 --mode sampled --model sage \
      --batch-size 4 --save-predictions p.txt >/dev/null || { echo "FAILED: predictions in pieces"; exit 1; }
    cmp p.txt whole.txt || { echo "FAILED: predictions written in pieces differ"; exit 1; } ;;
  bench_smoke)
    out=$("$TESSERA" bench spmm --nodes 2000 --degree 5 --widths 8,33 --repeat 2 && "$TESSERA" bench gemm --m 300 --n 20 \
      --k 30 --repeat 2 && "$TESSERA" bench stream --elements 100000 --repeat 2) || exit 1
    echo "$out"
    for want in "spmm width    8:" "spmm width   33:" "GB/s" "GFLOP/s" "gemm 300x20x30: NN" "GFLOP/s, NT" "GFLOP/s, TN" "stream triad: 100000 floats"; do
      grep -qF "$want" <<<"$out" || { echo "FAILED: missing '$want'"; exit 1; }
    done
    "$TESSERA" bench spmm --nodes 2000 --widths 8 --repeat 1 --kernels team | grep -qF "team kernels" || exit 1
    "$TESSERA" bench spmm --nodes 2000 --widths 8 --repeat 1 --dtype bf16 | grep -qF "X in bf16" || exit 1
    expect_error "--dtype: f16 not in \{f32,bf16\}" "-" -- "$TESSERA" bench spmm --nodes 2000 --dtype f16
    # The host kernels name their row loop; the plain one runs on every CPU, and a loop the CPU lacks is refused.
    "$TESSERA" bench spmm --nodes 2000 --widths 8 --repeat 1 --kernels host | grep -qE "host kernels \((avx512|avx2|plain) loop\)" ||
      { echo "FAILED: bench spmm names no host loop"; exit 1; }
    "$TESSERA" bench spmm --nodes 2000 --widths 8 --repeat 1 --kernels host --host-loop plain | grep -qF "(plain loop)" || exit 1
    if ! grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
      expect_error "--host-loop avx512: this CPU or build cannot run it" "-" -- \
        "$TESSERA" bench spmm --nodes 2000 --widths 8 --host-loop avx512
    fi
    expect_error "--host-loop: sse not in \{auto,avx512,avx2,plain\}" "-" -- "$TESSERA" bench spmm --nodes 2000 --host-loop sse
    # The benchmark script refuses a bad round count before it installs or runs anything.
    out=$(ROUNDS=two bash "$SOURCE_DIR/scripts/bench_fullgraph.sh" 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] && grep -qF "ROUNDS must be a positive whole number, not 'two'" <<<"$out" ||
      { echo "FAILED: bench_fullgraph.sh ROUNDS=two gave exit $rc: $out"; exit 1; }
    "$TESSERA" bench gemm --m 30 --n 20 --k 10 --repeat 1 --host-gemm blas | grep -qF "host kernels blas" || exit 1
    # oneDNN where the build has it (then it is also the default), a clear refusal where it does not.
    if onednn=$("$TESSERA" bench gemm --m 30 --n 20 --k 10 --repeat 1 --host-gemm onednn 2>&1); then
      grep -qF "host kernels onednn" <<<"$onednn" || { echo "FAILED: $onednn"; exit 1; }
      "$TESSERA" bench gemm --m 30 --n 20 --k 10 --repeat 1 | grep -qF "host kernels onednn" || exit 1
    else
      expect_error "--host-gemm onednn needs oneDNN" "-" -- "$TESSERA" bench gemm --m 10 --host-gemm onednn
    fi
    expect_error "--host-gemm must be auto, blas or onednn, not 'mkl'" "-" -- "$TESSERA" bench gemm --m 10 --host-gemm mkl
    expect_error "--kernels must be auto, host, team or vendor, not 'gpu'" "-" -- "$TESSERA" bench gemm --kernels gpu
    expect_error "kernel path 'vendor' has no GEMM kernel in this build" "-" -- \
      "$TESSERA" bench gemm --m 10 --kernels vendor
    expect_error "--gemm-dtype: expected f32 or bf16, got 'fp16'" "-" -- "$TESSERA" bench gemm --m 10 --gemm-dtype fp16
    expect_error "--gemm-dtype bf16 is for the host GEMM path \\(oneDNN\\); --kernels team runs GEMMs on the team path" \
      "-" -- "$TESSERA" bench gemm --m 10 --gemm-dtype bf16 --kernels team ;;
  plan_and_auto)
    "$TESSERA" prep synth --kind rmat --nodes 5000 --edges 30000 --features 16 --classes 4 -o r.h5 >/dev/null || exit 1
    out=$("$TESSERA" plan --data r.h5 --ranks 8 --machine perlmutter) || exit 1
    echo "$out"
    [ "$(grep -cE '^ +[0-9]+  [0-9]+x[0-9]+x[0-9]+ ' <<<"$out")" -eq 10 ] || { echo "FAILED: expected 10 grids"; exit 1; }
    $MPIEXEC -n 2 "$TESSERA" bench comm --repeat 2 --write machine.json | grep -q "fit: alpha" || exit 1
    "$TESSERA" bench spmm --nodes 4000 --widths 8 --repeat 1 --fit --write machine.json | grep -q "fit (eq. 4.4)" || exit 1
    grep -q '"spmm_c0"' machine.json || { echo "FAILED: machine file"; exit 1; }
    # The GEMM rate and the bandwidth measured into the same file (the local profile's 60e9 and 14e9 replaced).
    "$TESSERA" bench gemm --m 2000 --n 64 --k 64 --repeat 1 --write machine.json | grep -qF "wrote machine.json" || exit 1
    "$TESSERA" bench stream --elements 1000000 --repeat 1 --write machine.json | grep -qF "wrote machine.json" || exit 1
    grep -qE '"gemm_rate": [1-9]' machine.json && ! grep -qE '"gemm_rate": 60000000000\.0,' machine.json &&
      grep -qE '"memory_bandwidth": [1-9]' machine.json && ! grep -qE '"memory_bandwidth": 14000000000\.0,' machine.json &&
      grep -q '"spmm_c0"' machine.json || { cat machine.json; echo "FAILED: gemm/stream --write"; exit 1; }
    cp machine.json kept.json
    if bf16=$("$TESSERA" bench gemm --m 2000 --n 64 --k 64 --repeat 1 --gemm-dtype bf16 --write machine.json 2>&1); then
      grep -qE '"gemm_rate_bf16": [1-9]' machine.json || { cat machine.json; echo "FAILED: bf16 --write"; exit 1; }
    else  # a CPU without bf16 GEMMs: refused, the file untouched
      echo "$bf16"; cmp machine.json kept.json || { echo "FAILED: machine file changed by a refused run"; exit 1; }
    fi
    # A machine file to update is checked before anything is measured; --write never names an input.
    echo '{}' >bad.json
    expect_error "bad.json: not a valid machine file" "-" -- "$TESSERA" bench gemm --m 10 --write bad.json
    expect_error "bad.json: not a valid machine file" "-" -- "$TESSERA" bench stream --elements 10 --write bad.json
    expect_error "missing.*--write" "-" -- "$TESSERA" bench stream --elements 10 --write missing/m.json
    cp r.h5 r-kept.h5
    expect_error "r.h5.*--write.*--data|r.h5.*--data.*--write" "-" -- \
      "$TESSERA" bench spmm --data r.h5 --widths 8 --repeat 1 --fit --write r.h5
    cmp r.h5 r-kept.h5 || { echo "FAILED: bench spmm --write wrote over its --data"; exit 1; }
    expect_error "--write requires --fit" "-" -- "$TESSERA" bench spmm --nodes 100 --widths 8 --write m2.json
    pick=$($MPIEXEC -n 4 "$TESSERA" train --data r.h5 --grid auto --machine-file machine.json --epochs 2 | grep "grid auto") || exit 1
    echo "$pick"
    expect_error "--machine must be perlmutter, frontier or local, not 'summit'" "-" -- \
      "$TESSERA" plan --data r.h5 --ranks 4 --machine summit
    # bf16 features: every grid's predicted memory and load peak below fp32's (the block in half the bytes).
    "$TESSERA" prep synth --kind rmat --nodes 5000 --edges 30000 --features 256 --classes 4 -o wide.h5 >/dev/null || exit 1
    for dtype in f32 bf16; do
      "$TESSERA" plan --data wide.h5 --ranks 4 --hidden 256 --feature-dtype $dtype |
        sed -nE 's/^ +[0-9]+  ([0-9x]+) .* MB +([0-9.]+) MiB \(([0-9.]+) MiB\)$/\1 \2 \3/p' | sort >"plan-$dtype" || exit 1
    done
    [ "$(wc -l <plan-f32)" -eq 6 ] || { cat plan-f32; echo "FAILED: expected 6 grids in MiB"; exit 1; }
    join plan-f32 plan-bf16 | awk '!($4 < $2 && $5 < $3) { bad = 1 } END { exit bad }' ||
      { join plan-f32 plan-bf16; echo "FAILED: bf16 not below fp32"; exit 1; }
    # A GAT is handed the features widened, one fp32 copy its input dropout masks in place: still below.
    for dtype in f32 bf16; do
      "$TESSERA" plan --data wide.h5 --ranks 4 --model gat --feature-dtype $dtype |
        sed -nE 's/^ +[0-9]+  ([0-9x]+) .* MB +([0-9.]+) MiB \(([0-9.]+) MiB\)$/\1 \2 \3/p' | sort >"gat-$dtype" || exit 1
    done
    [ "$(wc -l <gat-f32)" -eq 6 ] || { cat gat-f32; echo "FAILED: expected 6 GAT grids in MiB"; exit 1; }
    join gat-f32 gat-bf16 | awk '!($4 < $2 && $5 < $3) { bad = 1 } END { exit bad }' ||
      { join gat-f32 gat-bf16; echo "FAILED: GAT bf16 not below fp32"; exit 1; }
    expect_error "--feature-dtype: expected f32 or bf16, got 'f16'" "-" -- \
      "$TESSERA" plan --data wide.h5 --ranks 4 --feature-dtype f16
    # bf16 activations: every grid's predicted peak below fp32's (the kept aggregations in half the bytes),
    # the load's the same.
    for dtype in f32 bf16; do
      "$TESSERA" plan --data r.h5 --ranks 4 --layers 3 --hidden 64 --activation-dtype $dtype |
        sed -nE 's/^ +[0-9]+  ([0-9x]+) .* MB +([0-9.]+) MiB \(([0-9.]+) MiB\)$/\1 \2 \3/p' | sort >"act-$dtype" || exit 1
    done
    [ "$(wc -l <act-f32)" -eq 6 ] || { cat act-f32; echo "FAILED: expected 6 grids in MiB"; exit 1; }
    join act-f32 act-bf16 | awk '!($4 < $2 && $5 == $3) { bad = 1 } END { exit bad }' ||
      { join act-f32 act-bf16; echo "FAILED: bf16 activations not below fp32"; exit 1; }
    expect_error "--activation-dtype: expected f32 or bf16, got 'f16'" "-" -- \
      "$TESSERA" plan --data r.h5 --ranks 4 --activation-dtype f16
    expect_error "--activation-dtype bf16 is for --model gcn / sage" "-" -- \
      "$TESSERA" plan --data r.h5 --ranks 4 --model gat --activation-dtype bf16
    # bf16 GEMMs: every grid's GEMM seconds and predicted peak above fp32's (the host GEMM rounds its
    # operands into bf16 copies it keeps), the load's the same.
    for dtype in f32 bf16; do
      "$TESSERA" plan --data r.h5 --ranks 4 --layers 3 --hidden 64 --gemm-dtype $dtype |
        sed -nE 's/^ +[0-9]+  ([0-9x]+) +([0-9.]+ +){3}([0-9.]+) .* MB +([0-9.]+) MiB \(([0-9.]+) MiB\)$/\1 \3 \4 \5/p' |
        sort >"gemm-$dtype" || exit 1
    done
    [ "$(join gemm-f32 gemm-bf16 | wc -l)" -eq 6 ] || { cat gemm-*; echo "FAILED: expected 6 grids in MiB"; exit 1; }
    join gemm-f32 gemm-bf16 | awk '!($5 > $2 && $6 > $3 && $7 == $4) { bad = 1 } END { exit bad }' ||
      { join gemm-f32 gemm-bf16; echo "FAILED: bf16 GEMMs not priced above fp32's"; exit 1; }
    expect_error "--gemm-dtype: expected f32 or bf16, got 'f16'" "-" -- \
      "$TESSERA" plan --data r.h5 --ranks 4 --gemm-dtype f16 ;;
  plan_calibration)
    # The published epochs the GPU profiles are calibrated against, through the command line as a user
    # plans them (sizes-only graph files), within 0.8-1.25x; --save-machine writes the profile planned
    # with, which plans the same from a file, and never over an input.
    py=python3; $py -c 'import h5py' 2>/dev/null || py=/usr/bin/python3
    $py "$SOURCE_DIR/scripts/calibrate_plan.py" --tessera "$TESSERA" || { echo "FAILED: calibration"; exit 1; }
    "$TESSERA" prep synth --kind rmat --nodes 3000 --edges 20000 --features 16 --classes 4 -o r.h5 >/dev/null || exit 1
    "$TESSERA" plan --data r.h5 --ranks 8 --machine frontier --save-machine f.json >built.txt || exit 1
    grep -q '"gathered_element_bytes": 28' f.json || { echo "FAILED: saved profile"; cat f.json; exit 1; }
    "$TESSERA" plan --data r.h5 --ranks 8 --machine-file f.json >file.txt || exit 1
    diff <(grep -E '^ +[0-9]+  ' built.txt) <(grep -E '^ +[0-9]+  ' file.txt) || { echo "FAILED: file plans differ"; exit 1; }
    cp f.json keep.json
    expect_error "save-machine" "-" -- "$TESSERA" plan --data r.h5 --ranks 2 --machine-file f.json --save-machine f.json
    cmp f.json keep.json || { echo "FAILED: the machine file read was overwritten"; exit 1; }
    expect_error "save-machine" "-" -- "$TESSERA" plan --data r.h5 --ranks 2 --save-machine r.h5
    expect_error "--schedule plexus prices GCN layers only, not --model sage" "-" -- \
      "$TESSERA" plan --data r.h5 --ranks 2 --model sage --schedule plexus
    expect_error "--schedule: plexus2 not in" "-" -- "$TESSERA" plan --data r.h5 --ranks 2 --schedule plexus2
    sed 's/"layer_seconds": [0-9.e-]*/"layer_seconds": -1/' f.json >neg.json
    expect_error "neg.json: layer_seconds must be finite and not negative" "-" -- \
      "$TESSERA" plan --data r.h5 --ranks 2 --machine-file neg.json
    echo "ok: calibration points, --save-machine" ;;
  memory_plan)
    # The memory model's prediction, printed before the load, against the measured peaks (the load's and the
    # run's) on grids of 1 to 8 ranks, on a graph big enough that its data outweighs the process: never
    # below the measurement, and above it by at most 25% (the run's peak) and 50% (the load's);
    # a grid predicted above --memory-per-rank is refused before the load, and --grid auto avoids it. The
    # load reports each phase as it ends, unless --quiet.
    if ldd "$TESSERA" | grep -q libasan; then echo "skipped: AddressSanitizer's shadow memory is not the program's"; exit 77; fi
    "$TESSERA" prep synth --kind rmat --nodes 65536 --edges 700000 --features 64 --classes 16 -o r.h5 >/dev/null || exit 1
    cat > check.py <<'PY'
import re, sys
text = sys.stdin.read()
def mib(number, unit): return float(number) * (1024 if unit == "GiB" else 1)
pred = re.search(r"predicted peak ([0-9.]+) (MiB|GiB) \(load ([0-9.]+) (MiB|GiB)", text)
load = re.search(r"loaded .*peak memory ([0-9.]+) MiB per rank", text)
peak = re.search(r"epochs; peak memory ([0-9.]+) MiB per rank", text)
if not (pred and load and peak): sys.exit(f"FAILED: {sys.argv[1]}: missing lines\n{text}")
# A second argument "lower-bound": the predictions are only checked not to fall below the measurements.
slack = float("inf") if sys.argv[2:] == ["lower-bound"] else 1.0
for name, want, got, over in (("load", mib(pred[3], pred[4]), float(load[1]), 0.5 * slack),
                              ("peak", mib(pred[1], pred[2]), float(peak[1]), 0.25 * slack)):
    print(f"{sys.argv[1]} {name}: predicted {want:.0f} MiB, measured {got:.1f} MiB ({100 * (want / got - 1):+.0f}%)")
    if want + 0.5 < got: sys.exit(f"FAILED: {sys.argv[1]} {name} predicted below the measured peak")
    if want > (1 + over) * got: sys.exit(f"FAILED: {sys.argv[1]} {name} prediction more than {over:.0%} above")
PY
    # A multi-label graph of 112 tasks (ogbn-proteins' count): its label rows counted too.
    "$TESSERA" prep synth --kind rmat --nodes 65536 --edges 700000 --features 64 --classes 16 --tasks 112 \
      -o tasks.h5 >/dev/null || exit 1
    for grid in 1x1x1 2x2x2; do
      ranks=$(( $(tr x '*' <<<"$grid") ))
      out=$(mpi "$ranks" "$TESSERA" train --data tasks.h5 --grid "$grid" --layers 2 --hidden 64 --epochs 1) ||
        { echo "$out"; exit 1; }
      python3 check.py "tasks $grid" <<<"$out" || exit 1
    done
    # bf16 features: the feature block in half the bytes, predicted as measured, and both peaks below the
    # fp32 run's (without input dropout both orders aggregate the features first). The load of features
    # this wide is over-predicted on one rank (by 60%, fp32 alike, and the run's peak with it: the model
    # counts the rows read beside the exchange's buffers), so only the lower bounds are checked here.
    "$TESSERA" prep synth --kind rmat --nodes 32768 --edges 200000 --features 512 --classes 16 -o wide.h5 \
      >/dev/null || exit 1
    for grid in 1x1x1 2x2x2; do
      ranks=$(( $(tr x '*' <<<"$grid") ))
      for dtype in f32 bf16; do
        out=$(mpi "$ranks" "$TESSERA" train --data wide.h5 --grid "$grid" --layers 2 --hidden 64 --epochs 1 \
          --input-dropout 0 --feature-dtype $dtype) || { echo "$out"; exit 1; }
        python3 check.py "wide $dtype $grid" lower-bound <<<"$out" || exit 1
        grep -E "peak memory" <<<"$out" | sed -E 's/.*peak memory ([0-9.]+) MiB.*/\1/' > "peaks-$dtype"
      done
      paste peaks-f32 peaks-bf16 | awk '$2 >= $1 { bad = 1 } END { exit bad }' ||
        { paste peaks-f32 peaks-bf16; echo "FAILED: bf16 peaks not below fp32's on $grid"; exit 1; }
      # A GAT is handed the features widened, one fp32 copy its input dropout masks in place (fp32 runs
      # hold the features and the dropout's copy): the run's peak still below fp32's.
      for dtype in f32 bf16; do
        out=$(mpi "$ranks" "$TESSERA" train --data wide.h5 --grid "$grid" --model gat --hidden 8 --heads 8 \
          --epochs 1 --input-dropout 0.6 --feature-dtype $dtype) || { echo "$out"; exit 1; }
        python3 check.py "wide gat $dtype $grid" lower-bound <<<"$out" || exit 1
        sed -nE 's/.*epochs; peak memory ([0-9.]+) MiB.*/\1/p' <<<"$out" > "gat-peak-$dtype"
      done
      paste gat-peak-f32 gat-peak-bf16 | awk 'NF != 2 || $2 >= $1 { bad = 1 } END { exit bad }' ||
        { paste gat-peak-f32 gat-peak-bf16; echo "FAILED: GAT bf16 peak not below fp32's on $grid"; exit 1; }
    done
    for grid in 1x1x1 2x1x1 1x2x2 2x2x2 1x1x8; do
      ranks=$(( $(tr x '*' <<<"$grid") ))
      out=$(mpi "$ranks" "$TESSERA" train --data r.h5 --grid "$grid" --layers 2 --hidden 64 --epochs 1 --verbose) || { echo "$out"; exit 1; }
      python3 check.py "$grid" <<<"$out" || exit 1
      # Progress: one line per load phase as it ends (6 for two layers), all before the load line.
      [ "$(grep -cE '^load: [a-z0-9 ]+ done, phase [1-6] of 6, ' <<<"$out")" -eq 6 ] &&
        [ "$(grep -E '^load: |^loaded ' <<<"$out" | tail -1 | cut -c1-7)" = "loaded " ] ||
        { echo "$out"; echo "FAILED: load progress lines"; exit 1; }
    done
    # Three layers: two of them take temporaries and input gradients from the model's shared workspace.
    out=$(mpi 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 3 --hidden 64 --epochs 1) || { echo "$out"; exit 1; }
    python3 check.py "2x2x2, 3 layers" <<<"$out" || exit 1
    # --recompute-aggregation: the layers keep no A H; predicted and measured lower, the run the same.
    peak_kept=$(sed -n 's/.*epochs; peak memory \([0-9.]*\) MiB per rank)$/\1/p' <<<"$out")
    kept_out=$out
    last_kept=$(grep -E "^epoch +1 " <<<"$out" | cut -c1-40)
    out=$(mpi 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 3 --hidden 64 --epochs 1 --recompute-aggregation) ||
      { echo "$out"; exit 1; }
    python3 check.py "2x2x2, 3 layers, --recompute-aggregation" <<<"$out" || exit 1
    peak_recomputed=$(sed -n 's/.*epochs; peak memory \([0-9.]*\) MiB per rank)$/\1/p' <<<"$out")
    [ "$(grep -E "^epoch +1 " <<<"$out" | cut -c1-40)" = "$last_kept" ] &&
      python3 -c "import sys; sys.exit(0 if float('$peak_recomputed') < float('$peak_kept') else 1)" ||
      { echo "$out"; echo "FAILED: recompute changed the loss or saved no memory ($peak_kept -> $peak_recomputed MiB)"; exit 1; }
    expect_error "tessera: error: --recompute-aggregation is for --mode full / minibatch" "-" -- \
      "$TESSERA" train --data r.h5 --mode sampled --recompute-aggregation
    # --activation-dtype bf16: the layers keep A H in bf16; predicted and measured lower, the first epoch's
    # loss within bf16's rounding of fp32's (its first step is fp32's), the first line says so.
    out16=$(mpi 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 3 --hidden 64 --epochs 1 --activation-dtype bf16) ||
      { echo "$out16"; exit 1; }
    python3 check.py "2x2x2, 3 layers, --activation-dtype bf16" <<<"$out16" || exit 1
    head -n 1 <<<"$out16" | grep -qF "activations: layers that aggregate first keep A H for the weight gradient in bf16" ||
      { echo "$out16"; echo "FAILED: the bf16 line"; exit 1; }
    peak16=$(sed -n 's/.*epochs; peak memory \([0-9.]*\) MiB per rank)$/\1/p' <<<"$out16")
    loss() { sed -nE 's/^epoch +1 +loss ([0-9.]+) .*/\1/p' <<<"$1"; }
    python3 -c "import sys; sys.exit(0 if float('$peak16') < float('$peak_kept') and abs(float('$(loss "$out16")') / float('$(loss "$kept_out")') - 1) < 1e-2 else 1)" ||
      { echo "$out16"; echo "FAILED: bf16 activations saved no memory or moved the loss ($peak_kept -> $peak16 MiB)"; exit 1; }
    # --gemm-dtype bf16, where the CPU runs it: the host GEMM's bf16 copies of its operands counted. Each
    # prediction at or above the measured peak, and the prediction grown over the fp32 GEMMs' run's by at
    # least what the peak grew (alone and with bf16 activations, whose GEMMs read the kept bits). On one
    # rank the copies must show in the peak; on 2x2x2 they are a few MiB a rank, which the allocator may
    # place in memory an earlier phase freed (its measured growth was 0.6 to 4.0 MiB in runs of one build).
    cat > grew.py <<'PY'
import re, sys
def peaks(text):
    pred = re.search(r"predicted peak ([0-9.]+) (MiB|GiB)", text)
    peak = re.search(r"epochs; peak memory ([0-9.]+) MiB per rank", text)
    return float(pred[1]) * (1024 if pred[2] == "GiB" else 1), float(peak[1])
(p32, m32), (p16, m16) = peaks(open(sys.argv[1]).read()), peaks(open(sys.argv[2]).read())
print(f"{sys.argv[3]}: bf16 GEMMs' peak grew {m16 - m32:.1f} MiB, predicted {p16 - p32:.0f} MiB")
must_grow = sys.argv[4] == "must-grow"
if (must_grow and m16 - m32 < 1) or p16 - p32 < m16 - m32 - 1:
    sys.exit(f"FAILED: {sys.argv[3]}: growth not predicted")
PY
    for extra in "" "--activation-dtype bf16"; do
      for grid in 1x1x1 2x2x2; do
        ranks=$(( $(tr x '*' <<<"$grid") ))
        run() { mpi "$ranks" "$TESSERA" train --data r.h5 --grid "$grid" --layers 3 --hidden 128 --epochs 1 $extra "$@" 2>&1; }
        run > gemm-f32.out || { cat gemm-f32.out; exit 1; }
        if run --gemm-dtype bf16 > gemm-bf16.out; then
          python3 check.py "$grid, 3x128, --gemm-dtype bf16 $extra" < gemm-bf16.out &&
            python3 grew.py gemm-f32.out gemm-bf16.out "$grid $extra" "$([ "$grid" = 1x1x1 ] && echo must-grow || echo may-hide)" ||
              exit 1
        elif grep -q "needs oneDNN .* and a CPU with AVX-512" gemm-bf16.out; then
          echo "bf16 GEMMs do not run here: their predictions not checked"; break 2
        else
          cat gemm-bf16.out; exit 1
        fi
      done
    done
    # A budget between the two predictions: refused, the message names --recompute-aggregation with its
    # prediction (and more ranks); under the default --memory-policy auto the run recomputes and trains.
    predicted() { sed -nE 's/^memory per rank on grid 2x2x2: predicted peak ([0-9]+) MiB.*/\1/p' <<<"$1"; }
    kept=$(predicted "$kept_out") recomputed=$(predicted "$out")
    [ -n "$kept" ] && [ -n "$recomputed" ] && [ "$recomputed" -lt "$kept" ] || { echo "FAILED: predictions '$kept' '$recomputed'"; exit 1; }
    budget=$(( (kept + recomputed) * 11 / 20 ))M  # between the two, each with the 10% margin
    expect_error "tessera: error: grid 2x2x2 needs about $kept MiB .* Predicted to fit: .*--recompute-aggregation \($recomputed MiB\); .*[0-9]+ ranks with --grid [0-9x]+ \([0-9]+ MiB\); or --memory-per-rank 0 to run anyway" "-" -- \
      $MPIEXEC -n 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 3 --hidden 64 --epochs 1 --memory-per-rank "$budget" --memory-policy refuse
    out=$(mpi 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 3 --hidden 64 --epochs 1 --memory-per-rank "$budget") || { echo "$out"; exit 1; }
    grep -q "^memory policy auto: --recompute-aggregation on grid 2x2x2 (predicted peak $recomputed MiB" <<<"$out" &&
      [ "$(grep -E "^epoch +1 " <<<"$out" | cut -c1-40)" = "$last_kept" ] || { echo "$out"; echo "FAILED: --memory-policy auto"; exit 1; }
    # A budget between bf16 activations' prediction and fp32's: the refusal names --activation-dtype bf16
    # with its prediction (auto never takes it: it rounds the weight gradients' inputs).
    halved=$(predicted "$out16")
    [ -n "$halved" ] && [ "$halved" -lt "$kept" ] || { echo "FAILED: bf16 prediction '$halved' of '$kept'"; exit 1; }
    budget=$(( (kept + halved) * 11 / 20 ))M
    expect_error "tessera: error: grid 2x2x2 needs about $kept MiB .* Predicted to fit: .*--activation-dtype bf16 \($halved MiB\); .*or --memory-per-rank 0 to run anyway" "-" -- \
      $MPIEXEC -n 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 3 --hidden 64 --epochs 1 --memory-per-rank "$budget" --memory-policy refuse
    expect_error "tessera: error: grid 2x2x2 needs about [0-9]+ MiB .*\(--memory-per-rank\)\. Nothing is predicted to fit, on these ranks or on up to 64 times as many; --memory-per-rank 0 runs anyway$" "-" -- \
      $MPIEXEC -n 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 3 --hidden 64 --epochs 1 --memory-per-rank 1
    expect_error "tessera: error: --memory-policy must be auto or refuse, not 'never'" "-" -- \
      "$TESSERA" train --data r.h5 --memory-policy never
    # --load-budget: the load's exchanges in rounds of 1 MiB per rank; predicted as measured, the same run.
    # (This graph is too small for the rounds to lower the peak measurably: scripts/bench_load.sh shows it.)
    for grid in 1x1x1 2x2x2; do
      ranks=$(( $(tr x '*' <<<"$grid") ))
      whole=$(mpi "$ranks" "$TESSERA" train --data r.h5 --grid "$grid" --layers 2 --hidden 64 --epochs 1 --load-budget 0) ||
        { echo "$whole"; exit 1; }
      out=$(mpi "$ranks" "$TESSERA" train --data r.h5 --grid "$grid" --layers 2 --hidden 64 --epochs 1 --load-budget 1M --verbose) ||
        { echo "$out"; exit 1; }
      python3 check.py "$grid, --load-budget 1M" <<<"$out" || exit 1
      grep -qE "^load phases.* adjacency 0 [0-9.]+ s [0-9]+ MiB in [0-9]+ rounds;" <<<"$out" &&
        [ "$(grep -E "^epoch +1 " <<<"$out" | cut -c1-40)" = "$(grep -E "^epoch +1 " <<<"$whole" | cut -c1-40)" ] ||
        { echo "$whole"; echo "$out"; echo "FAILED: rounds missing or the run changed"; exit 1; }
    done
    expect_error "tessera: error: --load-budget: expected a size such as 4G" "-" -- \
      "$TESSERA" train --data r.h5 --load-budget 4x
    expect_error "tessera: error: --load-budget is for --mode full / minibatch" "-" -- \
      "$TESSERA" train --data r.h5 --mode sampled --load-budget 64M
    out=$(mpi 2 "$TESSERA" train --data r.h5 --grid 2x1x1 --layers 2 --hidden 8 --epochs 1 --quiet) || exit 1
    ! grep -qE "^load: |^memory per rank" <<<"$out" || { echo "$out"; echo "FAILED: --quiet printed progress"; exit 1; }
    expect_error "tessera: error: grid 2x2x2 needs about" "-" -- \
      $MPIEXEC -n 8 "$TESSERA" train --data r.h5 --grid 2x2x2 --layers 2 --hidden 64 --epochs 1 --memory-per-rank 40M
    expect_error "tessera: error: --memory-per-rank: expected a size such as 4G" "-" -- \
      "$TESSERA" train --data r.h5 --memory-per-rank 4x
    # A budget just under the fastest grid's predicted peak: --grid auto must take another grid.
    read -r fastest need unit < <("$TESSERA" plan --data r.h5 --ranks 8 --layers 2 --hidden 64 | awk '$1 == 1 {print $2, $10, $11}')
    [ "$unit" = MiB ] || { echo "FAILED: expected the fastest grid's peak in MiB, got '$need $unit'"; exit 1; }
    budget=$(( ${need%.*} - 1 ))M
    out=$(mpi 8 "$TESSERA" train --data r.h5 --grid auto --layers 2 --hidden 64 --epochs 1 --memory-per-rank "$budget") || exit 1
    picked=$(grep -o "grid auto: [0-9x]*" <<<"$out" | cut -d' ' -f3)
    echo "fastest $fastest ($need MiB), picked under $budget: $picked"
    [ -n "$picked" ] && [ "$picked" != "$fastest" ] || { echo "$out"; echo "FAILED: --grid auto ignored the budget"; exit 1; }
    ;;
  thread_defaults)
    # Without OMP_NUM_THREADS every rank takes its share of the CPUs it may run on; an explicit setting wins
    # and is warned about once per node when the node's ranks then run more threads than it has CPUs.
    good_h5
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc honours both
    first_line() { env -u OMP_NUM_THREADS "$@" 2>&1 | grep -vE "^ *phases|^epoch|^loaded|^best"; }
    check() {  # check WANT [UNWANTED] -- CMD...: the run's lines contain WANT and not UNWANTED
      local want=$1 unwanted=$2; shift 3
      out=$(first_line "$@") || { echo "$out"; echo "FAILED: $*"; exit 1; }
      echo "$out"
      grep -qF -- "$want" <<<"$out" || { echo "FAILED: missing '$want'"; exit 1; }
      [ -z "$unwanted" ] || ! grep -qE -- "$unwanted" <<<"$out" || { echo "FAILED: has '$unwanted'"; exit 1; }
    }
    plural() { [ "$1" -eq 1 ] && echo "1 thread" || echo "$1 threads"; }
    train=(train --data g.h5 --epochs 1 --hidden 4)
    check "1 rank on 1 node, $(plural "$cpus") each (default: 1 rank on $cpus CPU" "" -- "$TESSERA" "${train[@]}"
    each=$(( cpus / 4 > 0 ? cpus / 4 : 1 ))
    check "4 ranks on 1 node, $(plural $each) each (default: 4 ranks on $cpus CPU" "warning|WARNING" -- \
      env OMPI_MCA_hwloc_base_binding_policy=none $MPIEXEC -n 4 "$TESSERA" "${train[@]}" --grid 1x2x2
    check "4 ranks on 1 node, 1 thread each (OMP_NUM_THREADS)" "warning|WARNING" -- \
      env OMP_NUM_THREADS=1 OMPI_MCA_hwloc_base_binding_policy=none $MPIEXEC -n 4 "$TESSERA" "${train[@]}" --grid 1x2x2
    # Both spellings reach Kokkos, whichever its version reads (3.4: --kokkos-threads, 4.x: --kokkos-num-threads).
    for spelling in --kokkos-threads=1 --kokkos-num-threads=1; do
      check "1 rank on 1 node, 1 thread each (--kokkos-threads)" "not recognized" -- "$TESSERA" "${train[@]}" $spelling
    done
    if [ "$cpus" -gt 1 ]; then
      check "1 thread each (SLURM_CPUS_PER_TASK" "" -- env SLURM_CPUS_PER_TASK=1 "$TESSERA" "${train[@]}"
    fi
    # A malformed Slurm value is named and ignored (the run goes on with the default; exit 0).
    check "tessera: warning: SLURM_CPUS_PER_TASK is '4x', not a positive integer; ignored" "" -- \
      env SLURM_CPUS_PER_TASK=4x "$TESSERA" "${train[@]}"
    grep -qF "$(plural "$cpus") each (default:" <<<"$out" || { echo "FAILED: default after a bad Slurm value"; exit 1; }
    threads=$(( cpus / 2 + 1 ))
    check "tessera: warning: the 2 ranks on node $(hostname) run $((2 * threads)) threads on its $cpus CPUs (OMP_NUM_THREADS)" \
      "Kokkos::OpenMP" -- env OMP_NUM_THREADS=$threads OMPI_MCA_hwloc_base_binding_policy=none $MPIEXEC -n 2 "$TESSERA" \
      "${train[@]}" --grid 1x1x2
    [ "$(grep -c "tessera: warning" <<<"$out")" -eq 1 ] || { echo "FAILED: one warning per node"; exit 1; } ;;
  dataset_recipes)
    # Every recipe under datasets/ is a valid `tessera train` configuration for its mode, and states what
    # accuracy to expect (or to compare with) in the form scripts/ogb_suite.sh reads.
    count=0
    for recipe in "$SOURCE_DIR"/datasets/*/*.toml; do
      mode=$(basename "$recipe" .toml); mode=${mode%%-*}; extra=()  # full-gat.toml: a full recipe
      [ "$mode" != minibatch ] || extra=(--grid 2x1x1x1)
      out=$("$TESSERA" train --config "$recipe" --data g.h5 "${extra[@]}" --print-config) ||
        { echo "FAILED: $recipe"; exit 1; }
      grep -qx "mode=\"$mode\"" <<<"$out" || { echo "FAILED: $recipe is not a $mode recipe"; exit 1; }
      grep -Eq '^# (expect|reference): test 0\.[0-9]+( \+- 0\.[0-9]+)? \(' "$recipe" ||
        { echo "FAILED: $recipe has no '# expect:' or '# reference:' line"; exit 1; }
      count=$((count + 1))
    done
    for dir in "$SOURCE_DIR"/datasets/*/; do
      # A link dataset (task=link) trains in full-graph mode only and has no synthetic stand-in.
      task=$(set -u; task=node; source "$dir/dataset.sh"; echo "$task")
      files=(README.md dataset.sh full.toml); [ "$task" = link ] || files+=(minibatch.toml sampled.toml)
      for f in "${files[@]}"; do
        [ -f "$dir/$f" ] || { echo "FAILED: $dir lacks $f"; exit 1; }
      done
      (set -u; task=node; source "$dir/dataset.sh"; [ -n "$raw_dir" ] && [ ${#info[@]} -ge 3 ] &&
        { [ "$task" = link ] || [ ${#synth_args[@]} -ge 8 ]; }) || { echo "FAILED: $dir/dataset.sh"; exit 1; }
    done
    echo "$count recipes valid"
    [ "$count" -ge 29 ] || { echo "FAILED: expected 9 node datasets x 3 modes and 2 link datasets"; exit 1; } ;;
  ogb_suite)
    # scripts/ogb_suite.sh end to end: Cora's recipes on 2 ranks must meet their expectations; a generated
    # OGB-layout dataset converts and passes its counts check; wrong counts, an absent dataset and a
    # synthetic stand-in are reported as such; every plot is a PNG image.
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: $SHARED_DIR/datasets/cora is absent"; exit 77; }
    py=python3; $py -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
    $py -c 'import matplotlib' 2>/dev/null || { echo "skipped: no python3-matplotlib (scripts/setup.sh installs it)"; exit 77; }
    suite() { bash "$SOURCE_DIR/scripts/ogb_suite.sh" --ranks 2 --graphs "$work/graphs" "$@"; }
    ln -s "$SHARED_DIR/datasets/cora" cora
    suite --data-root "$work" --out r1 cora || { echo "FAILED: the Cora recipes"; cat r1/SUMMARY.md; exit 1; }
    cat r1/SUMMARY.md
    for mode in full minibatch sampled; do
      grep -Eq "^\| cora \| real \| $mode \| [0-9a-z]+ \| 2 \| [0-9]+ \| [0-9.]+ \| [0-9.]+ ± [0-9.]+ \| yes \|" r1/SUMMARY.md ||
        { echo "FAILED: no met $mode row"; exit 1; }
    done
    # A generated dataset in OGB's layout, with recipes written here; one copy claims a wrong node count.
    fixture
    mkdir -p recipes/tiny recipes/tiny-wrong && mv ds tiny
    printf 'raw_dir=tiny\nprep_args=()\ninfo=("nodes:     50" "features:  6" "classes:   3" "splits:    test 20, train 20, valid 10")\nsynth_args=(--kind csbm --nodes 50 --edges 100 --features 6 --classes 3)\n' \
      > recipes/tiny/dataset.sh
    sed 's/nodes:     50/nodes:     51/' recipes/tiny/dataset.sh > recipes/tiny-wrong/dataset.sh
    mkdir -p recipes/absent-one && sed 's/^raw_dir=tiny/raw_dir=nowhere/' recipes/tiny/dataset.sh > recipes/absent-one/dataset.sh
    out=$(bash "$SOURCE_DIR/scripts/ogb_suite.sh" --datasets recipes typo 2>&1) && { echo "FAILED: a typo ran"; exit 1; }
    grep -qx "ogb_suite: recipes/typo/dataset.sh: no such dataset" <<<"$out" || { echo "FAILED: $out"; exit 1; }
    for mode in full minibatch sampled; do
      sed -E 's/^(epochs|hidden) = .*/\1 = 4/; s/^batch-size = "32"/batch-size = "8"/; s/^# expect:/# reference:/' \
        "$SOURCE_DIR/datasets/cora/$mode.toml" | tee recipes/tiny/$mode.toml > recipes/tiny-wrong/$mode.toml
    done
    if suite --datasets recipes --data-root "$work" --out r2 --modes full,sampled tiny tiny-wrong absent-one 2>&1; then
      echo "FAILED: a count mismatch must fail the suite"; exit 1
    fi
    cat r2/SUMMARY.md
    grep -Eq '^\| tiny \| real \| full \| [0-9x]+ \| 2 \| 4 \| [0-9.]+ \| ref ' r2/SUMMARY.md || { echo "FAILED: tiny full row"; exit 1; }
    grep -Eq '^\| tiny \| real \| sampled \| 2ranks \| 2 \| 4 \| ' r2/SUMMARY.md || { echo "FAILED: tiny sampled row"; exit 1; }
    ! grep -q '^| tiny | real | minibatch' r2/SUMMARY.md || { echo "FAILED: --modes ignored"; exit 1; }
    grep -qF "| tiny-wrong | real | info | - | 2 | - |" r2/SUMMARY.md && grep -qF "info mismatch: expected 'nodes:     51'" r2/SUMMARY.md ||
      { echo "FAILED: no count mismatch row"; exit 1; }
    grep -qF "absent: no" r2/SUMMARY.md || { echo "FAILED: no absent row"; exit 1; }
    # A dataset named but absent fails the suite, unless asked to skip it.
    out=$(suite --datasets recipes --data-root "$work" --out r4 absent-one 2>&1) && { echo "$out"; echo "FAILED: an absent dataset passed"; exit 1; }
    grep -q "^ogb_suite: absent-one: failed: absent: no .* (--skip-missing skips an absent dataset)$" <<<"$out" ||
      { echo "$out"; echo "FAILED: absent message"; exit 1; }
    out=$(suite --datasets recipes --data-root "$work" --out r5 --skip-missing absent-one 2>&1) || { echo "$out"; echo "FAILED: --skip-missing"; exit 1; }
    grep -q "^ogb_suite: absent-one: skipped: absent: no " <<<"$out" || { echo "$out"; echo "FAILED: skipped message"; exit 1; }
    # A synthetic stand-in is labelled so and never judged.
    suite --synthetic --epochs 2 --modes full,minibatch --out r3 cora || { echo "FAILED: synthetic run"; exit 1; }
    grep -q "SYNTHETIC STAND-INS" r3/SUMMARY.md && grep -Eq '^\| cora \| synthetic \| minibatch \| 2x1x1x1 \| 2 \| 2 \| [0-9.]+ \| ref [0-9.]+ ± [0-9.]+ \| - \|' r3/SUMMARY.md ||
      { echo "FAILED: synthetic rows"; cat r3/SUMMARY.md; exit 1; }
    [ "$(wc -l < r3/results.csv)" -eq 3 ] || { echo "FAILED: results.csv rows"; exit 1; }
    $py - r1/plots/cora r2/plots/tiny r3/plots/cora <<'PY' || { echo "FAILED: plots"; exit 1; }
import json, os, struct, sys
want = {"loss.png", "accuracy.png", "epoch_time.png", "breakdown.png", "imbalance.png", "bytes.png", "plots.json"}
for folder, sampled in zip(sys.argv[1:], (True, True, False)):
    names = set(os.listdir(folder))
    expected = want | ({"cache_hit_rate.png"} if sampled else set())
    assert names == expected, (folder, sorted(names))
    series = json.load(open(os.path.join(folder, "plots.json")))
    assert set(series) == expected - {"plots.json"}, series
    for name in names - {"plots.json"}:
        data = open(os.path.join(folder, name), "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", name
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 200 and height >= 200 and len(data) > 5000, (name, width, height, len(data))
print("plots ok")
PY
    ;;
  progress_reports)
    # Long steps report items, rate and time left on stderr (plain lines when stderr is a file); the
    # interval is forced to 0 here so that small runs report; --quiet silences the reports.
    fixture
    TESSERA_PROGRESS_SECONDS=0 "$TESSERA" prep ogb ds -o g.h5 2>err.txt >/dev/null || exit 1
    cat err.txt
    grep -Eq '^prep: features: 50/50 \(100%\), [0-9.]+k?/s, ETA 0 s$' err.txt || { echo "FAILED: prep progress"; exit 1; }
    grep -Eq '^prep: features: done, 50 in [0-9.]+ s$' err.txt || { echo "FAILED: prep done line"; exit 1; }
    ! grep -q $'\r' err.txt || { echo "FAILED: terminal control in a file"; exit 1; }
    train=(train --data g.h5 --mode minibatch --grid 2x1x1x1 --batch-size 10 --steps-per-epoch 4 --epochs 2 --hidden 4)
    TESSERA_PROGRESS_SECONDS=0 mpi 2 "$TESSERA" "${train[@]}" 2>err.txt >/dev/null || exit 1
    cat err.txt
    for want in "epoch 1 steps: 2/4 (50%)" "epoch 2 steps: done, 4 in" \
      "load: adjacency 0, rank 0's rows (two passes): done, " "load: features, rank 0's rows: done, "; do
      [ "$(grep -cF "$want" err.txt)" -eq 1 ] || { echo "FAILED: one '$want' line (rank 0 only)"; exit 1; }
    done
    TESSERA_PROGRESS_SECONDS=0 mpi 2 "$TESSERA" "${train[@]}" --quiet 2>err.txt >/dev/null || exit 1
    [ ! -s err.txt ] || { cat err.txt; echo "FAILED: --quiet printed progress"; exit 1; } ;;
  huge_pages)
    # Where the kernel's THP mode is madvise or always, tessera restarts once at start-up with glibc's hugetlb
    # tunable (same process id, still named tessera, so job tools and pgrep find it); TESSERA_HUGE_PAGES=0 or
    # a user's own GLIBC_TUNABLES leave the environment alone. Read off /proc while a long training runs.
    mode=$(sed -n 's/.*\[\([a-z]*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
    case "$mode" in madvise|always) ;; *) echo "skipped: transparent huge pages are '$mode' here"; exit 77 ;; esac
    good_h5
    probe() {  # WANT ENV...: start a run with ENV, check its environment and name, stop it
      local want=$1 pid i env_now=""; shift
      env "$@" "$TESSERA" train --data g.h5 --epochs 1000000 --hidden 4 --quiet >/dev/null 2>&1 &
      pid=$!
      for i in $(seq 100); do  # until the restart has happened (TESSERA_HUGE_PAGES is set then), or 1 s
        env_now=$(tr '\0' '\n' </proc/$pid/environ 2>/dev/null)
        grep -q "^TESSERA_HUGE_PAGES=" <<<"$env_now" && break
        [ "$want" = off ] && [ "$i" -ge 10 ] && break
        sleep 0.1
      done
      local comm; comm=$(cat /proc/$pid/comm 2>/dev/null)
      kill "$pid"; wait "$pid" 2>/dev/null
      echo "$* -> comm '$comm'; $(grep -E '^(GLIBC_TUNABLES|TESSERA_HUGE_PAGES)=' <<<"$env_now" | tr '\n' ' ')"
      [ "$comm" = tessera ] || { echo "FAILED: the process is named '$comm', not tessera"; exit 1; }
      if [ "$want" = on ]; then
        grep -qx "GLIBC_TUNABLES=glibc.malloc.hugetlb=1" <<<"$env_now" || { echo "FAILED: no hugetlb tunable"; exit 1; }
        grep -qx "TESSERA_HUGE_PAGES=1" <<<"$env_now" || { echo "FAILED: no restart mark"; exit 1; }
      else
        ! grep -q "hugetlb" <<<"$env_now" || { echo "FAILED: hugetlb tunable where it was not wanted"; exit 1; }
      fi
    }
    probe on -u TESSERA_HUGE_PAGES -u GLIBC_TUNABLES
    probe off -u TESSERA_HUGE_PAGES GLIBC_TUNABLES=glibc.malloc.arena_max=2
    probe off -u GLIBC_TUNABLES TESSERA_HUGE_PAGES=0
    TESSERA_HUGE_PAGES=yes mpi 2 "$TESSERA" info g.h5 >out.txt 2>&1 && { echo "FAILED: TESSERA_HUGE_PAGES=yes accepted"; exit 1; }
    cat out.txt
    [ "$(grep -c "^tessera: error: TESSERA_HUGE_PAGES must be 0 or 1, not 'yes'$" out.txt)" -eq 2 ] ||
      { echo "FAILED: one error line per rank"; exit 1; } ;;
  safe_outputs)
    # No output path names an input or another output, and none is an existing directory: each is refused
    # before the load with one line, and every input is left as it was.
    good_h5
    mkdir ck && "$TESSERA" train --data g.h5 --epochs 2 --quiet --checkpoint ck >/dev/null || exit 1
    cp g.h5 keep.h5 && cp ck/checkpoint.h5 keep-ck.h5
    ln -s g.h5 link.h5 && ln g.h5 hard.h5
    expect_error "^tessera: error: g.h5: --save-predictions names the input of --data; it would be overwritten" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 2 --save-predictions g.h5
    expect_error "\./g.h5: --metrics names the input of --data" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --metrics ./g.h5
    expect_error "link.h5: --save-embeddings names the input of --data" "-" -- "$TESSERA" train --data g.h5 --save-embeddings link.h5
    expect_error "hard.h5: --save-embeddings names the input of --data" "-" -- "$TESSERA" train --data g.h5 --save-embeddings hard.h5
    expect_error "ck/checkpoint.h5: --save-predictions names the input of --checkpoint \(the checkpoint resumed from\)" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 4 --checkpoint ck --resume --save-predictions ck/checkpoint.h5
    expect_error "ck/checkpoint.h5: given to both --checkpoint \(DIR/checkpoint.h5\) and --save-predictions" "-" -- \
      "$TESSERA" train --data g.h5 --checkpoint ck --save-predictions ck/checkpoint.h5
    expect_error "same.out: given to both --save-predictions and --save-embeddings" "same.out*" -- \
      "$TESSERA" train --data g.h5 --save-predictions same.out --save-embeddings same.out
    expect_error "ck: --save-predictions names a directory; give a file name" "ck/*tmp*" -- \
      "$TESSERA" train --data g.h5 --save-predictions ck
    expect_error "nodir/m.jsonl: cannot write --metrics \(No such file or directory\)" "nodir" -- \
      "$TESSERA" train --data g.h5 --metrics nodir/m.jsonl
    expect_error "g.h5: --checkpoint names a file, not a directory" "-" -- "$TESSERA" train --data g.h5 --checkpoint g.h5
    out=$("$TESSERA" train --data g.h5 --save-predictions g.h5 2>&1)
    ! grep -q "^loaded" <<<"$out" || { echo "FAILED: the paths were checked after the load"; exit 1; }
    cmp g.h5 keep.h5 && cmp ck/checkpoint.h5 keep-ck.h5 || { echo "FAILED: an input changed"; exit 1; }
    # A checkpoint directory that does not exist is made, parents too.
    "$TESSERA" train --data g.h5 --epochs 2 --quiet --checkpoint new/deep/ck >/dev/null && [ -f new/deep/ck/checkpoint.h5 ] ||
      { echo "FAILED: the checkpoint directory was not made"; exit 1; }
    # prep and partition: their outputs are checked the same way.
    expect_error "ds/raw/edge.csv.gz: --output names the input of the dataset ds" "-" -- "$TESSERA" prep ogb ds -o ds/raw/edge.csv.gz
    expect_error "ck: --output names a directory" "-" -- "$TESSERA" prep synth --nodes 100 --edges 300 -o ck
    expect_error "g.h5: --output names the input of --data" "-" -- $MPIEXEC -n 2 "$TESSERA" partition --data g.h5 --parts 2 --output g.h5
    # partition --output leaves the graph as it was; train reads the file with --partition-file, and refuses
    # one made for another graph.
    $MPIEXEC -n 2 "$TESSERA" partition --data g.h5 --parts 2 --output parts.h5 >/dev/null || { echo "FAILED: partition --output"; exit 1; }
    cmp g.h5 keep.h5 || { echo "FAILED: partition --output wrote into the graph"; exit 1; }
    $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode sampled --partition metis-2 --partition-file parts.h5 --epochs 2 \
      --batch-size 4 --quiet | grep -q "^best valid" || { echo "FAILED: train --partition-file"; exit 1; }
    "$TESSERA" prep synth --nodes 60 --edges 200 --classes 3 -o other.h5 >/dev/null || exit 1
    expect_error "parts.h5: made for another graph \(.*g.h5, [0-9]+ nodes" "-" -- $MPIEXEC -n 2 "$TESSERA" train --data other.h5 \
      --mode sampled --partition metis-2 --partition-file parts.h5 --epochs 1 --batch-size 4
    expect_error "--partition-file is for --mode sampled, not --mode full" "-" -- "$TESSERA" train --data g.h5 --partition-file parts.h5
    expect_error "g.h5: not a partition file \(make one with tessera partition --output\)" "-" -- $MPIEXEC -n 2 "$TESSERA" train \
      --data g.h5 --mode sampled --partition metis-2 --partition-file g.h5 --epochs 1
    expect_error "absent.h5: --partition-file cannot be read \(No such file or directory\)" "-" -- $MPIEXEC -n 2 "$TESSERA" train \
      --data g.h5 --mode sampled --partition metis-2 --partition-file absent.h5 --epochs 1
    echo "ok: every output checked against the inputs and the other outputs" ;;
  resume_same_run)
    # In every mode, N epochs straight and "stopped by a signal, then resumed to N" write the same files:
    # predictions and embeddings byte for byte, the metrics equal in every field that is not a time, a memory
    # figure or a feature-cache counter (a resumed run starts with a cold cache), the summary line equal
    # but for its times. A graph large enough that an epoch takes milliseconds: the signal must land while
    # the run trains.
    "$TESSERA" prep synth --nodes 4000 --edges 20000 --features 32 --classes 4 -o g.h5 >/dev/null || exit 1
    mpi 2 "$TESSERA" partition --data g.h5 --parts 2 --output parts.h5 >/dev/null || exit 1
    same_metrics() {  # A B: the records, without times, memory and cache counters, are equal
      python3 - "$1" "$2" <<'PY'
import json, re, sys
skip = re.compile(r"(_s|_ms|seconds|phases|bytes|peak|cache|hit|fetch|evict|remote|time|throughput|config)")
def load(path):
    out = []
    for line in open(path):
        r = json.loads(line)
        out.append({k: v for k, v in r.items() if not skip.search(k)})
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    print("FAILED: metrics differ at record", diff, a[diff] if diff < len(a) else None, b[diff] if diff < len(b) else None)
    sys.exit(1)
print("metrics equal:", len(a), "records")
PY
    }
    summary() { grep "^best valid" "$1" | sed 's/ (mean epoch.*//'; }
    same_run() {  # NAME RANKS EPOCHS ARGS...
      local name=$1 ranks=$2 epochs=$3 rc; shift 3
      local outputs=(--save-predictions "p-$name.txt" --save-embeddings "e-$name.h5" --metrics "m-$name.jsonl")
      mpi "$ranks" "$TESSERA" train --data g.h5 --epochs "$epochs" "${outputs[@]}" "$@" >straight.txt 2>&1 ||
        { cat straight.txt; echo "FAILED: $name straight run"; exit 1; }
      for f in "p-$name.txt" "e-$name.h5" "m-$name.jsonl"; do mv "$f" "straight-$f"; done
      # The checkpoint directory names this run's processes (with $$: no other test's); the signal goes
      # as soon as they are found (the watch is up before the load), leaving hundreds of epochs to land in.
      local ck="ck-$name-$$"
      : >run.txt  # emptied before the launch: the wait below must not read an earlier run's lines
      mpi "$ranks" "$TESSERA" train --data g.h5 --epochs "$epochs" --checkpoint "$ck" "${outputs[@]}" "$@" >run.txt 2>&1 &
      local job=$!
      wait_for_line run.txt "^epoch +1 " 120 || { cat run.txt; echo "FAILED: $name never reached epoch 1"; exit 1; }
      kill -USR1 "$(rank_pids "$ck" | tail -n 1)"
      wait $job; rc=$?
      [ "$rc" -eq 75 ] || { cat run.txt; echo "FAILED: $name exit $rc, expected 75"; exit 1; }
      [ ! -e "p-$name.txt" ] && [ ! -e "e-$name.h5" ] || { echo "FAILED: $name wrote outputs when stopped"; exit 1; }
      mpi "$ranks" "$TESSERA" train --data g.h5 --epochs "$epochs" --checkpoint "$ck" --resume "${outputs[@]}" "$@" \
        >resumed.txt 2>&1 || { cat resumed.txt; echo "FAILED: $name resume"; exit 1; }
      cmp "straight-p-$name.txt" "p-$name.txt" || { echo "FAILED: $name predictions differ"; exit 1; }
      cmp "straight-e-$name.h5" "e-$name.h5" || { echo "FAILED: $name embeddings differ"; exit 1; }
      same_metrics "straight-m-$name.jsonl" "m-$name.jsonl" || exit 1
      [ -n "$(summary straight.txt)" ] && [ "$(summary straight.txt)" = "$(summary resumed.txt)" ] ||
        { summary straight.txt; summary resumed.txt; echo "FAILED: $name summary lines differ"; exit 1; }
      echo "ok: $name: $(grep -oE 'after epoch [0-9]+' resumed.txt | head -n 1), then the same files as straight"
    }
    same_run full 1 600
    same_run 3d 2 400 --grid 2x1x1
    same_run minibatch 2 300 --mode minibatch --grid 2x1x1x1 --batch-size 400 --norm batch
    same_run sampled 2 60 --mode sampled --model sage --batch-size 64 --partition metis-2 --partition-file parts.h5
    # A schedule and clipping are functions of the step: the resumed run follows them from where it stopped.
    same_run schedule 2 400 --grid 2x1x1 --lr-schedule cosine --lr-warmup 10 --lr-min 0.001 --clip-grad-norm 0.2
    grep -q '"grad_norm"' straight-m-schedule.jsonl || { echo "FAILED: no grad_norm in the metrics"; exit 1; }
    # The cosine's factors depend on the run's length: resuming it with other --epochs is another run.
    expect_error "this run differs from the one that wrote the checkpoint: epochs 401 \(checkpoint: 400\)" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --epochs 401 --checkpoint "ck-schedule-$$" --resume --grid 2x1x1 \
      --lr-schedule cosine --lr-warmup 10 --lr-min 0.001 --clip-grad-norm 0.2
    # A job killed after its last checkpoint (every 5 epochs) leaves later epochs in the metrics; the resumed
    # run cuts them back first, so each epoch is there once and the file equals the straight run's.
    : >run.txt  # emptied before the launch: the wait below must not read an earlier run's lines
    "$TESSERA" train --data g.h5 --epochs 600 --checkpoint "ck-kill-$$" --checkpoint-every 5 --metrics m-kill.jsonl >run.txt 2>&1 &
    job=$!
    wait_for_line run.txt "^epoch +13 " 120 || { cat run.txt; echo "FAILED: never reached epoch 13"; exit 1; }
    kill -KILL "$(rank_pids "ck-kill-$$" | tail -n 1)"
    wait $job
    grep -q "^epoch  600 " run.txt && { echo "FAILED: the run ended before the kill"; exit 1; }
    "$TESSERA" train --data g.h5 --epochs 600 --checkpoint "ck-kill-$$" --resume --metrics m-kill.jsonl >/dev/null 2>&1 ||
      { echo "FAILED: resume after the kill"; exit 1; }
    same_metrics straight-m-full.jsonl m-kill.jsonl || exit 1
    # --checkpoint-every larger than the run: the end is saved all the same.
    "$TESSERA" train --data g.h5 --epochs 3 --checkpoint ck-every --checkpoint-every 10 --quiet >/dev/null &&
      [ -f ck-every/checkpoint.h5 ] || { echo "FAILED: no checkpoint at the end"; exit 1; }
    # Another setting or another graph is refused with the differences; --resume-force continues, saying so.
    expect_error "ck-full-$$/checkpoint.h5: this run differs from the one that wrote the checkpoint: lr 0.1 \(checkpoint: 0.01\)" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 601 --checkpoint "ck-full-$$" --resume --lr 0.1
    "$TESSERA" prep synth --nodes 4000 --edges 20000 --features 32 --classes 4 --seed 2 -o other.h5 >/dev/null || exit 1
    expect_error "this run differs from the one that wrote the checkpoint: .*graph_fingerprint [0-9a-f]{16} \(checkpoint: [0-9a-f]{16}\)" "-" -- \
      "$TESSERA" train --data other.h5 --epochs 601 --checkpoint "ck-full-$$" --resume
    expect_error "--resume-force goes with --resume" "-" -- "$TESSERA" train --data g.h5 --resume-force
    out=$("$TESSERA" train --data g.h5 --epochs 601 --checkpoint "ck-full-$$" --resume --lr 0.1 --resume-force 2>&1) ||
      { echo "$out"; echo "FAILED: --resume-force"; exit 1; }
    grep -q "although this run differs from the checkpoint's (--resume-force): lr 0.1 (checkpoint: 0.01)" <<<"$out" ||
      { echo "$out"; echo "FAILED: --resume-force says nothing"; exit 1; } ;;
  bad_options)
    # Zero-row blocks, an empty validation split, options of another mode, ranges, environment and process
    # traps: each a run that works or one line naming the problem.
    good_h5
    for norm in batch rms; do
      mpi 4 "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x4 --batch-size 2 --norm "$norm" --layers 3 \
        --epochs 1 --steps-per-epoch 3 --quiet >/dev/null 2>&1 || { echo "FAILED: --norm $norm with one-row blocks"; exit 1; }
    done
    "$TESSERA" prep synth --nodes 200 --edges 800 --classes 3 --train-fraction 0.02 -o few.h5 >/dev/null || exit 1
    mpi 4 "$TESSERA" train --data few.h5 --mode sampled --partition block --norm batch --epochs 1 --batch-size 4 --quiet \
      >/dev/null 2>&1 || { echo "FAILED: sampled --norm batch with ranks that hold no training node"; exit 1; }
    # GAT's options and --selection, checked on every rank before the load; plan checks the same bounds.
    expect_error "--heads must be in \[1, 1024\], not 0" "m.jsonl" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --model gat --heads 0 --metrics m.jsonl
    expect_error "--output-heads must be in \[1, 1024\], not 2000" "m.jsonl" -- \
      "$TESSERA" train --data g.h5 --model gat --output-heads 2000 --metrics m.jsonl
    expect_error "--attention-dropout must be in \[0, 1), not 1.5" "m.jsonl" -- \
      "$TESSERA" train --data g.h5 --model gat --attention-dropout 1.5 --metrics m.jsonl
    expect_error "--heads, --output-heads and --attention-dropout are for --model gat" "m.jsonl" -- \
      "$TESSERA" train --data g.h5 --heads 4 --metrics m.jsonl
    expect_error "--selection must be accuracy or accuracy-and-loss, not 'loss'" "m.jsonl" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --selection loss --metrics m.jsonl
    expect_error "--heads must be in \[1, 1024\], not 0" "-" -- "$TESSERA" plan --data g.h5 --ranks 2 --model gat --heads 0
    expect_error "--model must be gcn, sage or gat, not 'gin'" "-" -- "$TESSERA" plan --data g.h5 --ranks 2 --model gin
    # The schedule's and clipping's options, each checked on every rank before the load.
    expect_error "--lr-schedule must be constant, step or cosine, not 'linear'" "m.jsonl" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --lr-schedule linear --metrics m.jsonl
    expect_error "--lr-min must be in \[0, --lr = 0.01\], not 0.5" "m.jsonl" -- \
      "$TESSERA" train --data g.h5 --lr-schedule cosine --lr-min 0.5 --metrics m.jsonl
    expect_error "--lr-warmup \(20 epochs\) must end before the run does \(--epochs 10\)" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 10 --lr-warmup 20
    expect_error "--lr-gamma must be in \(0, 1\], not 2" "-" -- "$TESSERA" train --data g.h5 --lr-schedule step --lr-gamma 2
    expect_error "--lr-step-every must be positive, not 0" "-" -- "$TESSERA" train --data g.h5 --lr-schedule step --lr-step-every 0
    expect_error "--clip-grad-norm must be finite and not negative, not -1" "-" -- "$TESSERA" train --data g.h5 --clip-grad-norm -1
    # Where samples are built: a named place, a mini-batch and sampled option, on one rank in sampled mode.
    expect_error "--sample-on must be auto, host or device, not 'gpu'" "-" -- \
      "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x1 --batch-size 10 --sample-on gpu
    expect_error "--sample-on is for --mode minibatch / sampled, not --mode full" "-" -- "$TESSERA" train --data g.h5 --sample-on device
    out=$("$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x1 --batch-size 10 --epochs 1 --sample-on device 2>&1) ||
      { echo "$out"; exit 1; }
    grep -q "sampler on the device" <<<"$out" || { echo "$out"; echo "FAILED: --sample-on device"; exit 1; }
    out=$("$TESSERA" train --data g.h5 --mode sampled --partition block --batch-size 10 --epochs 1 --sample-on device 2>&1) ||
      { echo "$out"; exit 1; }
    grep -q "steps sampled on the device" <<<"$out" || { echo "$out"; echo "FAILED: sampled --sample-on device"; exit 1; }
    expect_error "--sample-on device: sampled mode builds its steps on the device on one rank only .*, not on 2 ranks" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode sampled --partition block --sample-on device
    "$TESSERA" prep synth --nodes 200 --edges 800 --classes 3 --valid-fraction 0 -o novalid.h5 >/dev/null || exit 1
    expect_error "novalid.h5: no validation nodes \(split 'valid' is empty\), so --patience cannot work; train with --patience 0" "p.txt" -- \
      "$TESSERA" train --data novalid.h5 --patience 3 --save-predictions p.txt
    out=$("$TESSERA" train --data novalid.h5 --epochs 6 --save-predictions p.txt 2>&1) || { echo "$out"; exit 1; }
    grep -q "no validation nodes: the best-validation record (and node outputs) is the last evaluated epoch" <<<"$out" &&
      grep -q "wrote predictions to p.txt (epoch 6)" <<<"$out" || { echo "$out"; echo "FAILED: no validation split"; exit 1; }
    expect_error "--config needs a TOML file name" "-" -- "$TESSERA" train --data g.h5 --config
    expect_error "grid '2x2x2x': expected XxYxZ or DxXxYxZ with a number after every 'x'" "-" -- "$TESSERA" train --data g.h5 --grid 2x2x2x
    expect_error "--steps-per-epoch must be at least 1, not -5" "-" -- \
      "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x1 --batch-size 10 --steps-per-epoch -5
    expect_error "--input-dropout must be in \[0, 1\), not -0.7" "-" -- "$TESSERA" train --data g.h5 --input-dropout -0.7
    expect_error "--batch-size: --mode sampled takes a count of seeds per rank from 1 to 2\^30" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --batch-size 9223372036854775807
    expect_error "--batch-size: at most 2\^30 vertices" "-" -- "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x1 --batch-size 99999999999
    for option in "--fanouts 5,5" "--prefetch-fraction 0.3" "--partition block" "--steps-per-epoch 3" "--no-prefetch-thread" "--prefetch-thread on"; do
      expect_error "${option%% *} is for --mode (minibatch / )?sampled, not --mode full" "-" -- "$TESSERA" train --data g.h5 $option
    done
    expect_error "--grid is for --mode full / minibatch, not --mode sampled" "-" -- "$TESSERA" train --data g.h5 --mode sampled --grid 1x1x1
    expect_error "--permute is for --mode full / minibatch, not --mode sampled" "-" -- "$TESSERA" train --data g.h5 --mode sampled --permute none
    expect_error "--memory-per-rank is for --mode full, not --mode minibatch" "-" -- \
      "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x1x1 --batch-size 10 --memory-per-rank 1G
    expect_error "--grid '1x1x2': --mode minibatch takes 4 axes DxXxYxZ" "-" -- \
      $MPIEXEC -n 2 "$TESSERA" train --data g.h5 --mode minibatch --grid 1x1x2 --batch-size 10
    expect_error "--prefetch-agent-timeout must be in \(0, 86400\] seconds, not -1" "-" -- \
      "$TESSERA" train --data g.h5 --mode sampled --prefetch-agent-timeout -1
    expect_error "--hidden must be in \[1, 16777216\], not 99999999999" "-" -- "$TESSERA" train --data g.h5 --hidden 99999999999
    expect_error "TESSERA_MPI_CHUNK_BYTES must be a positive number of bytes, not 'abc'" "-" -- \
      env TESSERA_MPI_CHUNK_BYTES=abc $MPIEXEC -n 2 "$TESSERA" info g.h5
    expect_error "synthetic graph: about [0-9.]+ GiB per rank are needed for 100000000000 nodes" "huge.h5*" -- \
      "$TESSERA" prep synth --nodes 100000000000 -o huge.h5
    expect_error "--repeat: must be a number in \[1, 1e\+06\], not '0'" "-" -- "$TESSERA" bench gemm --repeat 0
    expect_error "--degree: must be a number in \[1e-06, 1e\+06\], not 'nan'" "-" -- "$TESSERA" bench spmm --degree nan
    expect_error "--repeat: must be a number in \[1, 1e\+06\], not '0'" "-" -- "$TESSERA" bench stream --repeat 0
    expect_error "--hidden must be in \[1, 16777216\], not -1" "-" -- "$TESSERA" plan --data g.h5 --ranks 8 --hidden -1
    machine='"alpha_intra":1e-6,"beta_intra":1e10,"alpha_inter":1e-6,"memory_bandwidth":1e10,"gemm_rate":1e10'
    echo "{\"ranks_per_node\":0,\"beta_inter\":1e9,$machine}" >m0.json
    echo "{\"ranks_per_node\":4,\"beta_inter\":0,$machine}" >b0.json
    expect_error "m0.json: ranks_per_node must be at least 1, not 0" "-" -- "$TESSERA" plan --data g.h5 --ranks 8 --machine-file m0.json
    expect_error "b0.json: beta_inter must be a positive number, not 0" "-" -- "$TESSERA" plan --data g.h5 --ranks 8 --machine-file b0.json
    # More threads than Kokkos' OpenMP backend has slots: capped with a warning, not a crash.
    out=$(OMP_NUM_THREADS=768 "$TESSERA" info g.h5 2>&1) || { echo "$out"; echo "FAILED: OMP_NUM_THREADS=768"; exit 1; }
    grep -q "OMP_NUM_THREADS asks for 768 threads per rank; Kokkos' OpenMP backend runs at most 512" <<<"$out" ||
      { echo "$out"; echo "FAILED: no thread cap warning"; exit 1; }
    # Started through the dynamic loader, the huge-page restart steps aside.
    loader=$(readelf -l "$TESSERA" 2>/dev/null | sed -nE 's/.*interpreter: ([^]]+)\]/\1/p')
    if [ -n "$loader" ] && [ -x "$loader" ]; then
      "$loader" "$TESSERA" info g.h5 >/dev/null 2>&1 || { echo "FAILED: started through $loader"; exit 1; }
    fi
    echo "ok: every bad option is one line; the traps are gone" ;;
  slurm_scripts_as_sbatch)
    # The CPU job scripts as sbatch runs them, without Slurm: a copy in a spool directory, started in the job's
    # directory with SLURM_* set, srun a stand-in that runs the program under mpiexec. They find the binary from
    # the submit directory (never from their own path), key their checkpoints by data and options, refuse a
    # checkpoint of another graph, and leave the graph file unchanged when they partition it.
    mkdir -p spool bin submit/build/apps job
    ln -s "$TESSERA" submit/build/apps/tessera
    printf '%s\n' '#!/bin/bash' 'n=${SLURM_NTASKS:-1}' \
      'while [ $# -gt 0 ]; do case "$1" in -n) n=$2; shift 2 ;; -*) shift ;; *) break ;; esac; done' \
      "exec $MPIEXEC -n \"\$n\" \"\$@\"" >bin/srun
    chmod +x bin/srun
    job() {  # SCRIPT NTASKS SUBMIT_DIR ARGS...: the job's output on stdout, its exit status
      local script=$1 n=$2 submit=$3; shift 3
      cp "$SOURCE_DIR/scripts/slurm/$script" spool/slurm_script
      (cd job && env -u TESSERA -u TESSERA_ROOT PATH="$work/bin:$PATH" SLURM_SUBMIT_DIR="$submit" SLURM_NTASKS="$n" \
        SLURM_JOB_ID=$((++job_id)) SLURM_JOB_NAME=$script bash ../spool/slurm_script "$@" 2>&1)
    }
    job_id=100
    "$TESSERA" prep synth --nodes 300 --edges 1200 --classes 3 --seed 1 -o job/a.h5 >/dev/null &&
      "$TESSERA" prep synth --nodes 300 --edges 1200 --classes 3 --seed 2 -o job/b.h5 >/dev/null || exit 1
    out=$(job cpu_full.sh 2 "$work/submit" a.h5 2x1x1 4) && grep -q "^best valid" <<<"$out" ||
      { echo "$out"; echo "FAILED: cpu_full.sh"; exit 1; }
    out=$(job cpu_full.sh 2 "$work/spool" a.h5 2x1x1 4)
    [ $? -ne 0 ] && grep -q "cpu_full.sh: no tessera at $work/spool/build/apps/tessera; set TESSERA_ROOT or TESSERA" <<<"$out" ||
      { echo "$out"; echo "FAILED: a missing binary is not named"; exit 1; }
    # The same job again resumes; the same job on another graph of the same shape starts afresh.
    out=$(job cpu_full.sh 2 "$work/submit" a.h5 2x1x1 6) && grep -q "resumed from .*after epoch 4" <<<"$out" ||
      { echo "$out"; echo "FAILED: the same job did not resume"; exit 1; }
    out=$(job cpu_full.sh 2 "$work/submit" b.h5 2x1x1 6) && ! grep -q "resumed" <<<"$out" ||
      { echo "$out"; echo "FAILED: another graph's job resumed"; exit 1; }
    # Forced into a's checkpoint directory, b's job is refused by tessera itself.
    ckpt=$(ls -d job/tessera-checkpoint-a-* | head -n 1)
    out=$(TESSERA_CHECKPOINT=$work/$ckpt job cpu_full.sh 2 "$work/submit" b.h5 2x1x1 8)
    [ $? -ne 0 ] && grep -q "this run differs from the one that wrote the checkpoint: graph_edges" <<<"$out" ||
      { echo "$out"; echo "FAILED: a checkpoint of another graph was resumed"; exit 1; }
    sum=$(md5sum <job/a.h5)
    out=$(job cpu_sampled.sh 2 "$work/submit" a.h5 5,5 2) && grep -q "^best valid" <<<"$out" ||
      { echo "$out"; echo "FAILED: cpu_sampled.sh"; exit 1; }
    [ "$(md5sum <job/a.h5)" = "$sum" ] && ls job/tessera-partition-a-*-metis-2.h5 >/dev/null ||
      { echo "FAILED: cpu_sampled.sh wrote into the graph, or no partition file beside the outputs"; exit 1; }
    out=$(job cpu_minibatch.sh 2 "$work/submit" a.h5 2x1x1x1 0.5 2) && grep -q "^best valid" <<<"$out" ||
      { echo "$out"; echo "FAILED: cpu_minibatch.sh"; exit 1; }
    echo "ok: the CPU job scripts run as sbatch runs them" ;;
  setup_without_packages)
    # setup.sh --no-packages never calls apt, dpkg or sudo (stand-ins that record a call are first on PATH):
    # with nothing to be found it names every missing dependency and what provides it, and exits 1 having
    # built nothing; on this machine it finds each.
    mkdir stubs
    for tool in apt-get apt-cache dpkg-query sudo; do
      printf '#!/bin/sh\necho "$0 $*" >>%s/called.log\nexit 1\n' "$work" >"stubs/$tool" && chmod +x "stubs/$tool"
    done
    out=$(env -u CMAKE_PREFIX_PATH -u CPATH -u CPLUS_INCLUDE_PATH -u Kokkos_ROOT TESSERA_DEPS_PREFIXES=/nonexistent \
      PATH="$work/stubs:$PATH" bash "$SOURCE_DIR/scripts/setup.sh" --no-packages --check --backend hip 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -eq 1 ] || { echo "FAILED: exit $rc with dependencies missing"; exit 1; }
    for want in "MISSING parallel HDF5 >= 1.10 - module load cray-hdf5-parallel, spack install hdf5+mpi" "MISSING METIS 5" \
                "MISSING zlib" "MISSING nlohmann_json" "MISSING CLI11" "MISSING CBLAS - module load cray-libsci" "MISSING GoogleTest" \
                "MISSING Kokkos >= 3.4 (hip) - module load kokkos, or spack install kokkos@4 +rocm amdgpu_target=gfx90a" \
                "MISSING rocSPARSE" "nothing was built"; do
      grep -qF "$want" <<<"$out" || { echo "FAILED: no '$want'"; exit 1; }
    done
    # The Kokkos this build used (a release tarball's, or .deps/kokkos-host) is the one it finds.
    out=$(Kokkos_ROOT=${BUILD_KOKKOS_ROOT:-${Kokkos_ROOT:-}} PATH="$work/stubs:$PATH" \
      bash "$SOURCE_DIR/scripts/setup.sh" --no-packages --check 2>&1) ||
      { echo "$out"; echo "FAILED: the dependencies of this machine were not all found"; exit 1; }
    grep -q "found Kokkos >= 3.4" <<<"$out" || { echo "$out"; echo "FAILED: no Kokkos"; exit 1; }
    [ ! -s called.log ] || { cat called.log; echo "FAILED: setup.sh --no-packages called a package tool"; exit 1; }
    echo "ok: no package tool called; every missing dependency named" ;;
  setup_kokkos_tarball)
    # setup.sh --kokkos-tarball checks the archive before it builds anything: a checksum that does not match
    # (given, or in FILE.sha256 beside it) and an archive that is not a Kokkos release are refused.
    mkdir -p kokkos-9.9.99 other && echo "project(Kokkos)" > kokkos-9.9.99/CMakeLists.txt && cp kokkos-9.9.99/CMakeLists.txt other/
    tar -czf kokkos-9.9.99.tar.gz kokkos-9.9.99 && tar -czf other.tar.gz other
    echo "0000000000000000000000000000000000000000000000000000000000000000  kokkos-9.9.99.tar.gz" > kokkos-9.9.99.tar.gz.sha256
    sum=$(sha256sum kokkos-9.9.99.tar.gz | cut -d' ' -f1)
    setup() { bash "$SOURCE_DIR/scripts/setup.sh" --deps-only "$@" 2>&1; }
    out=$(setup --kokkos-tarball "$work/kokkos-9.9.99.tar.gz") && { echo "$out"; echo "FAILED: a wrong checksum was accepted"; exit 1; }
    grep -q "kokkos-9.9.99.tar.gz: sha256 $sum, expected 0000000000000000000000000000000000000000000000000000000000000000; refusing to build from it" <<<"$out" ||
      { echo "$out"; echo "FAILED: the checksum refusal"; exit 1; }
    out=$(setup --kokkos-tarball "$work/other.tar.gz" --kokkos-sha256 "$(sha256sum other.tar.gz | cut -d' ' -f1)") &&
      { echo "$out"; echo "FAILED: a foreign archive was accepted"; exit 1; }
    grep -q "other.tar.gz: not a Kokkos release tarball (its top folder is 'other', expected kokkos-X.Y.Z)" <<<"$out" ||
      { echo "$out"; echo "FAILED: the foreign archive's refusal"; exit 1; }
    out=$(setup --kokkos-tarball "$work/absent.tar.gz") && exit 1
    grep -q "absent.tar.gz: no such file" <<<"$out" || { echo "$out"; exit 1; }
    echo "ok: a Kokkos tarball is checked before anything is built" ;;
  help_and_version)
    # --version says what the build is; a misspelt subcommand or option is named with its closest spelling
    # and the --help of the subcommand it was given to; train --help is in groups.
    out=$("$TESSERA" --version) || { echo "FAILED: --version exit"; exit 1; }
    echo "$out"
    for want in "tessera 0.1.0 (git " "Kokkos " "backends:" "MPI: " "HDF5 " "vendor libraries:"; do
      grep -qF "$want" <<<"$out" || { echo "FAILED: --version lacks '$want'"; exit 1; }
    done
    expect_error "unknown subcommand 'trian'; did you mean 'train'\? \(see tessera --help\)" "-" -- "$TESSERA" trian
    expect_error "unknown subcommand 'version'; did you mean '--version'\?" "-" -- $MPIEXEC -n 2 "$TESSERA" version
    expect_error "train: unknown option '--hiden'; did you mean '--hidden'\? \(see tessera train --help\)" "-" -- \
      "$TESSERA" train --data g.h5 --hiden 32
    expect_error "synth: unknown option '--node'; did you mean '--nodes'\? \(see tessera prep synth --help\)" "-" -- \
      "$TESSERA" prep synth --node 10 -o x.h5
    expect_error "unknown subcommand 'synh'; did you mean 'synth'\? \(see tessera prep --help\)" "-" -- "$TESSERA" prep synh
    expect_error "train: unknown option '--zzzzzzzz' \(see tessera train --help\)" "-" -- "$TESSERA" train --data g.h5 --zzzzzzzz
    out=$("$TESSERA" train --help) || exit 1
    for group in Data Model Optimizer Parallelism "Mini-batch and sampled" "Sampled / prefetch" Output Performance Diagnostics; do
      grep -qx "$group:" <<<"$out" || { echo "FAILED: train --help has no group '$group'"; exit 1; }
    done
    # info takes --data as train, plan and partition do (its positional file still works); plan's model
    # defaults are train's.
    "$TESSERA" prep synth --nodes 100 --edges 300 -o g.h5 >/dev/null || exit 1
    "$TESSERA" info --data g.h5 | grep -q "valid:     yes" && "$TESSERA" info g.h5 | grep -q "valid:     yes" ||
      { echo "FAILED: info --data"; exit 1; }
    "$TESSERA" plan --data g.h5 --ranks 2 | grep -q ", 2 layers, hidden 16, 2 ranks" || { echo "FAILED: plan defaults"; exit 1; }
    echo "ok: --version, suggestions, help groups, info --data, plan's defaults" ;;
  slurm_jobs)
    # The CPU job scripts under a real one-node Slurm (sbatch, srun --mpi=pmix, scancel --signal, resume) and
    # the GPU job scripts through sbatch --test-only; skipped (77) where Slurm is not installed.
    bash "$SOURCE_DIR/scripts/slurm/check_local.sh" "$work/slurm" ;;
  console_and_metrics)
    # One line per epoch (loss, accuracies, validation loss, time, throughput), detail lines only when asked,
    # a short preamble; the metrics file opens with a header and every record names its kind and mode.
    [ -f "$SHARED_DIR/datasets/cora/raw/edge.csv.gz" ] || { echo "skipped: $SHARED_DIR/datasets/cora is absent"; exit 77; }
    "$TESSERA" prep ogb "$SHARED_DIR/datasets/cora" -o cora.h5 --symmetrize >/dev/null || exit 1
    line='^epoch +[0-9]+  loss [0-9.]+  train [0-9.]+  valid [0-9.]+  test [0-9.]+  valid loss [0-9.]+  [0-9.]+ ms  [0-9.e+]+ (edges|seeds)/s$'
    one=$("$TESSERA" train --data cora.h5 --epochs 3 --metrics m1.jsonl) || { echo "$one"; exit 1; }
    four=$(mpi 4 "$TESSERA" train --data cora.h5 --epochs 3 --grid 1x2x2 --metrics m4.jsonl) || { echo "$four"; exit 1; }
    echo "$four"
    for out in "$one" "$four"; do
      [ "$(grep -cE "$line" <<<"$out")" -eq 3 ] && [ "$(grep -c '^epoch' <<<"$out")" -eq 3 ] &&
        [ "$(sed -n '/^epoch/,$p' <<<"$out" | grep -cvE "$line")" -eq 1 ] &&
        [ "$(sed '/^epoch/,$d' <<<"$out" | wc -l)" -le 4 ] &&
        grep -qE "^best valid .* over this job's 2 epochs after its first; peak memory" <<<"$out" ||
        { echo "$out"; echo "FAILED: console lines"; exit 1; }
    done
    verbose=$(mpi 4 "$TESSERA" train --data cora.h5 --epochs 3 --grid 1x2x2 --verbose) || exit 1
    every=$(mpi 4 "$TESSERA" train --data cora.h5 --epochs 3 --grid 1x2x2 --details-every 2) || exit 1
    [ "$(grep -c 'phases max/mean ms' <<<"$verbose")" -eq 3 ] && grep -q '^load phases' <<<"$verbose" &&
      [ "$(grep -c 'phases max/mean ms' <<<"$every")" -eq 1 ] &&
      [ "$(grep -A1 '^epoch    2' <<<"$every" | tail -1 | grep -c 'phases max/mean')" -eq 1 ] ||
      { echo "$verbose"; echo "$every"; echo "FAILED: --verbose / --details-every"; exit 1; }
    mpi 2 "$TESSERA" train --data cora.h5 --epochs 2 --mode minibatch --grid 2x1x1x1 --batch-size 0.5 \
      --metrics mb.jsonl --quiet >/dev/null || exit 1
    mpi 2 "$TESSERA" train --data cora.h5 --epochs 2 --mode sampled --partition block --batch-size 100 \
      --metrics s.jsonl --quiet >/dev/null || exit 1
    python3 - <<'PY' || exit 1
import json
def load(path):
    return [json.loads(line) for line in open(path)]
one, four, mb, s = load("m1.jsonl"), load("m4.jsonl"), load("mb.jsonl"), load("s.jsonl")
for records, mode, ranks, grid in ((one, "full", 1, "1x1x1"), (four, "full", 4, "1x2x2"),
                                   (mb, "minibatch", 2, "2x1x1x1"), (s, "sampled", 2, "2x1x1x1")):
    h = records[0]
    assert h["kind"] == "header" and h["mode"] == mode and h["ranks"] == ranks and h["grid"] == grid, h
    assert h["dataset"]["nodes"] == 2708 and h["dataset"]["edges"] == 10556 and h["dataset"]["classes"] == 7, h
    assert h["version"].startswith("0.") and h["host"] and h["threads"] >= 1, h
    assert ("epochs=2" in h["config"]) or ("epochs=3" in h["config"]), h["config"]
    assert all(r["mode"] == mode and r["kind"] in ("epoch", "step") for r in records[1:]), mode
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert len(epochs) == (3 if mode == "full" else 2), (mode, len(epochs))
    # Throughput: the adjacency's nonzeros (edges and a self loop per node), the sampled vertices of every
    # replica's step, or the training seeds, over the epoch's steps (evaluation left out).
    work = {"full": 10556 + 2708, "minibatch": 2 * 1354, "sampled": 140}[mode]
    unit = "edges/s" if mode == "full" else "seeds/s"
    for r in epochs:
        assert r["throughput_unit"] == unit, r
        done = r["throughput"] * (r["epoch_s"] - r["eval_s"])
        assert abs(done / work - 1) < 1e-6, (mode, done, work)
        assert r["valid_loss"] > 0, r
# Every key a run writes is documented in the metrics reference.
import os, re
documented = set(re.findall(r"`([a-z_]+)`", open(os.path.join(os.environ["SOURCE_DIR"], "docs/reference/metrics.md")).read()))
written = {k for records in (one, four, mb, s) for r in records for k in r}
assert written <= documented, sorted(written - documented)
# The validation loss is the grid's, not a rank's: 1 and 4 ranks agree.
for a, b in zip(one[1:], four[1:]):
    assert abs(a["valid_loss"] - b["valid_loss"]) < 1e-4, (a["valid_loss"], b["valid_loss"])
print("ok: headers, kinds, modes, throughput and validation loss")
PY
    expect_error "tessera: error: --details-every must not be negative, not -1" "-" -- \
      "$TESSERA" train --data cora.h5 --details-every -1
    # Plots of runs on 1 and 4 ranks: a strong-scaling plot of one series, the others one series per run;
    # under a Python without matplotlib the script runs itself under Debian's, which has it.
    /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { echo "skipped: no python3-matplotlib (scripts/setup.sh installs it)"; exit 77; }
    /usr/bin/python3 -m venv --without-pip nomat || exit 1
    nomat/bin/python3 -c 'import matplotlib' 2>/dev/null && { echo "FAILED: the venv has matplotlib"; exit 1; }
    nomat/bin/python3 "$SOURCE_DIR/scripts/plot_metrics.py" m1.jsonl m4.jsonl mb.jsonl s.jsonl -o plots || exit 1
    /usr/bin/python3 - plots <<'PY' || { echo "FAILED: plots"; exit 1; }
import json, os, struct, sys
series = json.load(open(os.path.join(sys.argv[1], "plots.json")))
runs = ["m1", "m4", "mb", "s"]
want = {name: runs for name in ("loss.png", "accuracy.png", "epoch_time.png", "breakdown.png", "imbalance.png",
                                "bytes.png")}
want["scaling.png"] = ["cora full"]
want["cache_hit_rate.png"] = ["s"]
assert series == want, series
for name in want:
    data = open(os.path.join(sys.argv[1], name), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", name
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 200 and height >= 200 and len(data) > 5000, (name, width, height, len(data))
print("plots ok")
PY
    # Bad inputs: one line naming the file and the problem, exit 1, nothing plotted.
    printf '{"kind":"header"}\nnot json\n' > bad.jsonl
    out=$(/usr/bin/python3 "$SOURCE_DIR/scripts/plot_metrics.py" bad.jsonl -o badplots 2>&1; echo "exit $?")
    [ "$out" = "$(printf 'plot_metrics: bad.jsonl: line 2: not JSON (Expecting value)\nexit 1')" ] && [ ! -e badplots ] ||
      { echo "$out"; echo "FAILED: bad.jsonl"; exit 1; }
    out=$(/usr/bin/python3 "$SOURCE_DIR/scripts/plot_metrics.py" missing.jsonl -o badplots 2>&1; echo "exit $?")
    [ "$out" = "$(printf 'plot_metrics: missing.jsonl: no such file\nexit 1')" ] || { echo "$out"; echo "FAILED: missing file"; exit 1; }
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
