#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run_tests.sh pytest|install|bindings RANKS: the Python package's tests (ctest -L python). Environment:
# TESSERA (the program), SOURCE_DIR, BUILD_DIR (bindings, and install where the build has them), MPIEXEC,
# DATASETS (the folder holding cora/ in OGB's raw layout; without it the tests that need Cora skip).
# Debian's /usr/bin/python3 is used where the python3 first on PATH lacks the packages.
set -u
py=python3
$py -c 'import numpy, scipy, h5py, pytest' 2>/dev/null || py=/usr/bin/python3
$py -c 'import numpy, scipy, h5py, pytest' 2>/dev/null ||
  { echo "skipped: no python3-numpy, -scipy, -h5py, -pytest (scripts/setup.sh installs them)"; exit 77; }
export PYTHONDONTWRITEBYTECODE=1
work=$(mktemp -d /tmp/tessera-python-XXXXXX)
trap 'rm -rf "$work"' EXIT
case "$1" in
  pytest)
    cd "$SOURCE_DIR/python" && exec $py -m pytest -q -p no:cacheprovider --basetemp "$work/tmp" tests ;;
  install)
    # The offline install the docs show, from a copy (pip builds in the source directory).
    cp -r "$SOURCE_DIR/python" "$work/src" && cd "$work" || exit 1
    $py -m venv --system-site-packages v >/dev/null || exit 1
    v/bin/pip install --no-build-isolation --no-index ./src >pip.log 2>&1 || { cat pip.log; exit 1; }
    cd / && "$work/v/bin/python" -c 'import tessera, sys; sys.exit(0 if tessera.__file__.startswith("'"$work"'/v") else 1)' ||
      { echo "FAILED: the installed package is not the one imported"; exit 1; }
    "$work/v/bin/tessera-convert" --help | grep -q "planetoid" || { echo "FAILED: tessera-convert"; exit 1; }
    # Where the build has the bindings, the installed package trains with them (the copy pip installed).
    if [ -n "${BUILD_DIR:-}" ] && ls "$BUILD_DIR"/python/tessera/_tessera*.so >/dev/null 2>&1; then
      cd "$work" && rm -rf v && cp -r "$SOURCE_DIR/python" src2 && $py -m venv --system-site-packages v >/dev/null &&
        TESSERA_BUILD_DIR="$BUILD_DIR" v/bin/pip install --no-build-isolation --no-index ./src2 >pip.log 2>&1 ||
        { cat pip.log; exit 1; }
      cd / && "$work/v/bin/python" - "$work" <<'PY' || { echo "FAILED: the installed bindings"; exit 1; }
import sys, numpy as np, tessera
work = sys.argv[1]
assert tessera.__file__.startswith(work + "/v"), tessera.__file__
rng = np.random.default_rng(0)
tessera.write_graph(work + "/g.h5", rng.integers(0, 30, (2, 90)), rng.random((30, 4), dtype=np.float32),
                    rng.integers(0, 2, 30), train=np.arange(15), valid=np.arange(15, 22), test=np.arange(22, 30))
r = tessera.train(data=work + "/g.h5", epochs=3, hidden=4, quiet=True)
assert len(r.history) == 3 and r.embeddings.shape == (30, 4), r
from tessera import _tessera
assert _tessera.__file__.startswith(work + "/v"), _tessera.__file__
PY
    fi ;;
  bindings)
    ranks=${2:-1}
    $py -c 'import mpi4py, h5py._debian_h5py_mpi' 2>/dev/null ||
      { echo "skipped: no python3-mpi4py or python3-h5py-mpi (scripts/setup.sh installs them)"; exit 77; }
    ls "$BUILD_DIR"/python/tessera/_tessera*.so >/dev/null 2>&1 ||
      { echo "skipped: no bindings in $BUILD_DIR (configure with -DTESSERA_BUILD_PYTHON=ON)"; exit 77; }
    grid=(); [ "$ranks" = 4 ] && grid=(--grid 1x2x2)
    cora=${DATASETS:-}/cora
    if [ -f "$cora/raw/edge.csv.gz" ]; then
      # The program's run the bindings must reproduce (test_train.py's OPTIONS), on the same ranks.
      "$TESSERA" prep ogb "$cora" -o "$work/cora.h5" --symmetrize >/dev/null || exit 1
      mkdir -p "$work/cli"
      $MPIEXEC --oversubscribe -n "$ranks" "$TESSERA" train --data "$work/cora.h5" "${grid[@]}" --epochs 12 \
        --seed 3 --dropout 0.5 --weight-decay 5e-4 --quiet --metrics "$work/cli/metrics.jsonl" \
        --save-embeddings "$work/cli/embeddings.h5" --save-predictions "$work/cli/predictions.txt" >/dev/null || exit 1
    fi
    # Every rank runs the same tests in the same order; each its own pytest scratch directory.
    cd "$SOURCE_DIR/python/tests_bindings" &&
      TESSERA_PYTHONPATH="$BUILD_DIR/python" TESSERA_TEST_WORK="$work" exec $MPIEXEC --oversubscribe -n "$ranks" \
        bash -c 'exec "$0" -m pytest -q -p no:cacheprovider --color=no --basetemp "$1/tmp-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" .' \
        "$py" "$work" ;;
  *) echo "unknown case $1"; exit 2 ;;
esac
