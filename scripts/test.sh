#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up the dependencies (scripts/setup.sh --deps-only), builds Tessera with plain CMake through a preset
# (CMakePresets.json: the prefixes setup.sh made, nothing else of setup.sh), runs the whole test suite with
# ctest, then builds the CUDA variant (compile and link only: it needs a GPU to run). The last line printed
# is ctest's summary.
#
#   scripts/test.sh              host build in build/, all tests, then the CUDA build in build-cuda/
#   scripts/test.sh --sanitize   AddressSanitizer + UBSan build in build-asan/, all tests (no CUDA build)
#   scripts/test.sh --no-cuda    skip the CUDA build
#   scripts/test.sh --hip        also build the HIP variant (gfx90a, Debian's hipcc) into build-hip/
#   extra arguments after -- go to ctest (e.g. -- -L distributed)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize=0 cuda=1 hip=0 ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize=1; cuda=0; shift ;;
    --no-cuda) cuda=0; shift ;;
    --hip) hip=1; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "test.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

bash "$root/scripts/setup.sh" --deps-only
preset=host build=$root/build
[ "$sanitize" -eq 1 ] && preset=asan build=$root/build-asan
(cd "$root" && cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset" -j "$(nproc --all)")

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "${ctest_args[@]}") 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1)

# compile_check NAME BACKEND: builds a device variant (compile and link only) into build-BACKEND/.
compile_check() {
  local name=$1 backend=$2
  echo "test: building the $name variant (compile and link only) into build-$backend/"
  if ! bash "$root/scripts/setup.sh" --backend "$backend" >"$root/build-$backend.log" 2>&1; then
    tail -n 40 "$root/build-$backend.log"
    echo "test: the $name build failed (full log: build-$backend.log)"
    status=1
  else
    echo "test: $name build ok ($(ls "$root"/build-"$backend"/tests/test_* 2>/dev/null | wc -l) test programs built)"
  fi
}
if [ "$cuda" -eq 1 ]; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    compile_check CUDA cuda
  else
    echo "test: no CUDA toolkit at /usr/local/cuda: CUDA build skipped"
  fi
fi
[ "$hip" -eq 0 ] || compile_check HIP hip
echo "${summary:-ctest printed no summary}"
exit "$status"
