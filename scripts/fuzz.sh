#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds every fuzzing harness of tests/fuzz with libFuzzer + AddressSanitizer + UBSan (Debian's clang) and
# runs each for SECONDS (default 60), one after the other, starting from the seed corpus in
# tests/fuzz/corpus/HARNESS. New inputs go to build-fuzz/corpus/HARNESS, crashes to build-fuzz/findings/.
#   scripts/fuzz.sh [SECONDS] [HARNESS...]     (harnesses: ogb_text npz agent_answer graph_file checkpoint)
# Needs clang and libFuzzer: scripts/setup.sh --with-fuzz installs them. The HDF5 harnesses (graph_file,
# checkpoint) instrument the files they fuzz and link the rest from the host build in build/ (setup.sh
# makes it), with its include paths and libraries as CMake wrote them for their replay programs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
shift || true
harnesses=("$@")
all=(ogb_text npz agent_answer graph_file checkpoint)
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all[@]}")
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;; esac
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh --with-fuzz)" >&2; exit 2; }

declare -A sources=(
  [ogb_text]="src/tessera/graph/text_input.cpp"
  [npz]="src/tessera/graph/npz_input.cpp"
  [agent_answer]="src/tessera/prefetch/agent_answer.cpp"
  [graph_file]="src/tessera/graph/graph_file.cpp src/tessera/graph/graph_check.cpp src/tessera/graph/hdf5_io.cpp"
  [checkpoint]="src/tessera/models/training/checkpoint.cpp src/tessera/graph/hdf5_io.cpp"
)
declare -A uses_mpi=([graph_file]=1 [checkpoint]=1)

# The compile flags and link libraries of the host build's replay program for harness $1.
host_build_flags() {
  local dir=$root/build/tests/fuzz/CMakeFiles/fuzz_replay_$1.dir
  [ -f "$dir/flags.make" ] && [ -f "$dir/link.txt" ] || {
    echo "fuzz.sh: $1 links the host build, and build/ has none (run scripts/setup.sh first)" >&2
    exit 2
  }
  make -C "$root/build" --no-print-directory -s "fuzz_replay_$1" >/dev/null
  sed -n 's/^CXX_DEFINES = //p; s/^CXX_INCLUDES = //p' "$dir/flags.make" | tr '\n' ' '
  # The libraries follow the program's name; relative ones are relative to the replay's build folder.
  sed 's/.* -o fuzz_replay_[a-z_]* //' "$dir/link.txt" | tr ' ' '\n' |
    sed "s|^\.\./\.\./|$root/build/|" | tr '\n' ' '
}
out=$root/build-fuzz
mkdir -p "$out/findings"
printf '%-14s %8s %12s %10s %8s %s\n' harness seconds executions exec/s corpus findings > "$out/summary.txt"
status=0
for h in "${harnesses[@]}"; do
  [ -n "${sources[$h]:-}" ] || { echo "fuzz.sh: no harness '$h' (${all[*]})" >&2; exit 2; }
  echo "fuzz: building $h"
  extra=() leaks=1
  if [ -n "${uses_mpi[$h]:-}" ]; then
    flags=$(host_build_flags "$h")
    read -r -a extra <<<"-fopenmp $flags"
    # MPI's and HDF5's own allocations at exit are not this code's; the replay of the corpus in the sanitized
    # suite checks this code for leaks with the suppressions in tests/lsan.supp.
    leaks=0
  fi
  # shellcheck disable=SC2086
  clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/src" "$root/tests/fuzz/fuzz_$h.cpp" $(cd "$root" && echo ${sources[$h]} | sed "s|^|$root/|; s| | $root/|g") \
    "${extra[@]}" -lz -o "$out/fuzz_$h"
  mkdir -p "$out/corpus/$h"
  echo "fuzz: running $h for $seconds s"
  log=$out/fuzz_$h.log
  set +e
  # OpenMPI's own signal handlers would catch the harness's crashes before libFuzzer saves the input.
  OMPI_MCA_opal_signal="" ASAN_OPTIONS=detect_leaks=$leaks \
  "$out/fuzz_$h" -detect_leaks=$leaks -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/findings/$h-" "$out/corpus/$h" "$root/tests/fuzz/corpus/$h" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  found=$(find "$out/findings" -name "$h-*" | wc -l)
  printf '%-14s %8s %12s %10s %8s %s\n' "$h" "$seconds" "$runs" "$rate" "$(ls "$out/corpus/$h" | wc -l)" "$found" \
    >> "$out/summary.txt"
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "fuzz: $h stopped with exit $rc; the input is in $out/findings/, the report in $log"
    grep -m 5 -E "ERROR|SUMMARY|terminate|uncaught" "$log" || true
  fi
done
cat "$out/summary.txt"
exit $status
