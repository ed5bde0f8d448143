#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up and builds Tessera (scripts/setup.sh: the Debian packages, Kokkos, then the build through the
# `host` preset of CMakePresets.json, the Python bindings included), runs the whole test suite with ctest,
# then builds the CUDA variant (compile and link only: it needs a GPU to run). The last lines name each
# part built and each test group run.
#
#   scripts/test.sh                       host build in build/ (Debian's Kokkos 3.4), all tests, the CUDA build
#   scripts/test.sh --sanitize            AddressSanitizer + UBSan build in build-asan/, all tests (no CUDA build)
#   scripts/test.sh --no-cuda             skip the CUDA build
#   scripts/test.sh --hip                 also build the HIP variant (gfx90a, Debian's hipcc) into build-hip/
#   scripts/test.sh --kokkos-tarball F    build and test against the Kokkos of a release tarball instead
#                   [--kokkos-sha256 H]   (its checksum checked: H, else F.sha256 beside it)
#   scripts/test.sh --smoke-default-kokkos  also build the program against Debian's Kokkos 3.4 (the default
#                                         on a fresh machine) into build-kokkos3/ and run a short job on it
#   scripts/test.sh --require-all         fail unless every part the README promises was built (the Python
#                                         bindings, the CUDA compile check) — what CI runs (.ci/run)
#   scripts/test.sh --unity               build the host variant in batches too (setup.sh --unity: a shorter
#                                         build, what CI runs; a later setup.sh without it rebuilds)
#   scripts/test.sh --long                also run the tests labelled `long` (accuracy over many seeds on
#                                         large grids: an hour or more on two cores), left out by default
#   extra arguments after -- go to ctest (e.g. -- -L distributed)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize=0 cuda=1 hip=0 smoke=0 require_all=0 long=0 ctest_args=() kokkos=() unity=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize=1; cuda=0; shift ;;
    --no-cuda) cuda=0; shift ;;
    --hip) hip=1; shift ;;
    --kokkos-tarball) kokkos+=(--kokkos-tarball "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
    --kokkos-sha256) kokkos+=(--kokkos-sha256 "$2"); shift 2 ;;
    --smoke-default-kokkos) smoke=1; shift ;;
    --require-all) require_all=1; shift ;;
    --long) long=1; shift ;;
    --unity) unity=(--unity); shift ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "test.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

build=$root/build
setup=("${kokkos[@]}" "${unity[@]}")
[ "$sanitize" -eq 1 ] && build=$root/build-asan setup+=(--sanitize)
bash "$root/scripts/setup.sh" "${setup[@]}"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
[ "$long" -eq 1 ] || ctest_args=(-LE long "${ctest_args[@]}")
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "${ctest_args[@]}") 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1)
# "accuracy 2, cli 64, ..." from ctest's label summary: the test groups run.
groups=$(sed -nE 's/^([a-z0-9_-]+) += +[0-9.]+ sec\*proc \(([0-9]+) tests?\)$/\1 \2/p' "$log" | paste -sd, - | sed 's/,/, /g')

parts=()
kokkos_version=$("$build/apps/tessera" --version 2>/dev/null | sed -nE 's/^(Kokkos [0-9.]+).*/\1/p')
parts+=("host build ${build#"$root"/}/ (${kokkos_version:-Kokkos ?})")
missing=()
if ls "$build"/python/tessera/_tessera*.so >/dev/null 2>&1; then
  parts+=("Python bindings ($(sed -nE 's/^_?Python3_EXECUTABLE:[A-Z]+=(.*)$/\1/p' "$build/CMakeCache.txt" | head -n 1))")
elif [ "$sanitize" -eq 0 ]; then
  missing+=("the Python bindings")
fi

# smoke_default_kokkos: the program against Debian's Kokkos 3.4 (a unity build: the sources in batches),
# and a short job of each kind on it.
smoke_default_kokkos() {
  local b=$root/build-kokkos3 out=$root/build-kokkos3/smoke
  bash "$root/scripts/setup.sh" --deps-only >/dev/null
  cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$root/.deps/kokkos-host" \
    -DKokkos_DIR="$root/.deps/kokkos-host/lib/cmake/Kokkos" -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_PYTHON=OFF \
    -DCMAKE_UNITY_BUILD=ON >"$b.log" 2>&1 && cmake --build "$b" -j "$(nproc --all)" >>"$b.log" 2>&1 || { tail -n 30 "$b.log"; return 1; }
  # shellcheck source=/dev/null
  source "$root/scripts/mpi_env.sh"
  rm -rf "$out" && mkdir -p "$out" && local t=$b/apps/tessera
  { "$t" --version | head -n 2 &&
    mpiexec -n 2 "$t" prep synth --kind csbm --nodes 2000 --edges 10000 --features 16 --classes 4 -o "$out/g.h5" &&
    mpiexec -n 2 "$t" train --data "$out/g.h5" --grid 2x1x1 --epochs 3 --checkpoint "$out/ck" --quiet &&
    mpiexec -n 2 "$t" partition --data "$out/g.h5" --parts 2 &&
    mpiexec -n 2 "$t" train --data "$out/g.h5" --mode sampled --epochs 2 --batch-size 64 --quiet &&
    "$t" predict --checkpoint "$out/ck" --data "$out/g.h5" --output "$out/p.h5" --quiet; } >>"$b.log" 2>&1 ||
    { tail -n 30 "$b.log"; return 1; }
  grep -q "^Kokkos 3\." "$b.log" || { echo "test: build-kokkos3/ is not built against Kokkos 3.x"; return 1; }
}
if [ "$smoke" -eq 1 ]; then
  echo "test: building the program against Debian's Kokkos 3.4 into build-kokkos3/ for a short run"
  if smoke_default_kokkos; then
    parts+=("Kokkos 3.4 program build-kokkos3/ (smoke run passed)")
  else
    echo "test: the Kokkos 3.4 smoke build or run failed (log: build-kokkos3.log)"; status=1
  fi
fi

# compile_check NAME BACKEND: builds a device variant (compile and link only) into build-BACKEND/: the
# library, the program and the test programs labelled gpu (those that exercise the device paths); the other
# test programs are host logic the suite ran above (`setup.sh --backend BACKEND` builds them all). Sources
# are compiled in batches (a unity build): each pass through the device compiler reads the Kokkos headers
# once for several files.
compile_check() {
  local name=$1 backend=$2
  echo "test: building the $name variant (compile and link only) into build-$backend/"
  if ! bash "$root/scripts/setup.sh" --backend "$backend" --unity --target tessera_gpu_programs \
    >"$root/build-$backend.log" 2>&1; then
    tail -n 40 "$root/build-$backend.log"
    echo "test: the $name build failed (full log: build-$backend.log)"
    status=1
  else
    local programs; programs=$(ls "$root"/build-"$backend"/tests/test_* 2>/dev/null | wc -l)
    echo "test: $name build ok (the program and $programs test programs labelled gpu built)"
    parts+=("$name compile check build-$backend/ (the program and $programs gpu test programs)")
  fi
}
if [ "$cuda" -eq 1 ]; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    compile_check CUDA cuda
  else
    echo "test: no CUDA toolkit at /usr/local/cuda: CUDA build skipped"
    missing+=("the CUDA compile check (no /usr/local/cuda)")
  fi
fi
[ "$hip" -eq 1 ] && compile_check HIP hip
echo "test: built: $(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g')"
echo "test: test groups run: ${groups:-none}"
if [ ${#missing[@]} -gt 0 ]; then
  echo "test: not built: $(IFS=';'; echo "${missing[*]}" | sed 's/;/; /g')"
  [ "$require_all" -eq 0 ] || status=1
fi
echo "${summary:-ctest printed no summary}"
exit "$status"
