#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run_tests.sh pytest|install: the Python package's tests (ctest -L python). Environment: TESSERA (the
# program), SOURCE_DIR. Debian's /usr/bin/python3 is used where the python3 first on PATH lacks the packages.
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
    "$work/v/bin/tessera-convert" --help | grep -q "planetoid" || { echo "FAILED: tessera-convert"; exit 1; } ;;
  *) echo "unknown case $1"; exit 2 ;;
esac
