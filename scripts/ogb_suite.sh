#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the datasets/ recipes: converts each dataset that is present (or generates a stand-in of the same
# shape with --synthetic), checks `tessera info` against the dataset's published counts, partitions it,
# trains every recipe (full, minibatch, sampled) and writes a results folder:
#   OUT/SUMMARY.md   a table: the test score (accuracy, or the recipe's metric) against the expectation, epoch
#                    time, bytes per rank, peak memory
#   OUT/results.csv  the same rows
#   OUT/runs/        each run's console log and metrics (DATASET-MODE-GRID.jsonl)
#   OUT/plots/DATASET/*.png   scripts/plot_metrics.py over that dataset's runs
#
#   scripts/ogb_suite.sh [options] DATASET...      (DATASET: a folder name under datasets/)
#     --ranks P          MPI ranks per run (default 1); minibatch runs on the grid Px1x1x1
#     --data-root DIR    where the OGB loaders put the raw folders (default $TESSERA_DATA or ./data)
#     --synthetic        a contextual-SBM stand-in of each dataset's shape instead of the real data
#     --epochs N         override the recipes' epochs (quick checks; the expectation is then not judged)
#     --modes LIST       comma-separated subset of full,minibatch,sampled (default all)
#     --out DIR          results folder (default results/DATE-TIME)
#     --graphs DIR       where converted graph files are kept and reused (default results/graphs)
#     --datasets DIR     the recipes folder (default datasets/ of this repository)
#     --skip-missing     a dataset whose raw folder is absent is skipped (exit 0) instead of failing the suite
# Environment: TESSERA (default build/apps/tessera), MPIEXEC (default: srun in a Slurm allocation, else
# mpiexec, with --oversubscribe under Open MPI; see scripts/mpi_env.sh).
# Exit status: 0 when every named dataset ran, finished and met its expectation where one is judged (an
# absent dataset too with --skip-missing), 1 otherwise, 2 for a bad option.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command_line="scripts/ogb_suite.sh $*"
ranks=1 data_root=${TESSERA_DATA:-data} synthetic=0 epochs="" modes="full,minibatch,sampled"
out="" graphs="" datasets_dir=$root/datasets names=() skip_missing=0
die() { echo "ogb_suite: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=${2:-}; shift 2 ;;
    --data-root) data_root=${2:-}; shift 2 ;;
    --synthetic) synthetic=1; shift ;;
    --epochs) epochs=${2:-}; shift 2 ;;
    --modes) modes=${2:-}; shift 2 ;;
    --out) out=${2:-}; shift 2 ;;
    --graphs) graphs=${2:-}; shift 2 ;;
    --datasets) datasets_dir=${2:-}; shift 2 ;;
    --skip-missing) skip_missing=1; shift ;;
    -h|--help) sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) names+=("$1"); shift ;;
  esac
done
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || die "--ranks must be a positive integer, not '$ranks'"
[ -z "$epochs" ] || [[ "$epochs" =~ ^[1-9][0-9]*$ ]] || die "--epochs must be a positive integer, not '$epochs'"
[ ${#names[@]} -gt 0 ] || die "name at least one dataset: $(ls "$datasets_dir" 2>/dev/null | grep -v '\.md$' | tr '\n' ' ')"
IFS=, read -ra mode_list <<<"$modes"
for m in "${mode_list[@]}"; do
  case "$m" in full|minibatch|sampled) ;; *) die "--modes: unknown mode '$m' (full, minibatch, sampled)" ;; esac
done
for name in "${names[@]}"; do
  [ -f "$datasets_dir/$name/dataset.sh" ] || die "$datasets_dir/$name/dataset.sh: no such dataset"
done
tessera=${TESSERA:-$root/build/apps/tessera}
[ -x "$tessera" ] || die "$tessera: not built (run scripts/setup.sh, or set TESSERA)"
py=python3; $py -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
out=${out:-$root/results/$(date +%Y-%m-%d-%H%M%S)}
graphs=${graphs:-$root/results/graphs}
mkdir -p "$out/runs" "$out/plots" "$graphs" || die "cannot create $out or $graphs"
# shellcheck source=/dev/null
source "$root/scripts/mpi_env.sh"
read -ra mpiexec <<<"${MPIEXEC:-$TESSERA_LAUNCHER}"
mpi() { "${mpiexec[@]}" -n "$ranks" "$tessera" "$@"; }

csv=$out/results.csv
echo "dataset,data,mode,grid,ranks,epochs,test_acc,best_valid,best_epoch,expected,spread,judged,meets,epoch_ms,bytes_per_rank,peak_mib,status,metric" >"$csv"
failures=0
row() { echo "$1" >>"$csv"; }  # a CSV line; fields never contain commas

# expectation RECIPE: "kind value spread" from the recipe's '# expect:' or '# reference:' line.
expectation() {
  local line
  line=$(grep -m1 -E '^# (expect|reference): test ' "$1") || { echo "none - -"; return; }
  local kind=${line#\# }; kind=${kind%%:*}
  local value spread
  value=$(sed -E 's/^# [a-z]+: test ([0-9.]+).*/\1/' <<<"$line")
  spread=$(sed -nE 's/^# [a-z]+: test [0-9.]+ \+- ([0-9.]+).*/\1/p' <<<"$line")
  echo "$kind $value ${spread:-0.01}"
}

# prepare NAME: sets graph (the graph file) and data_kind, or returns 1 with a reason in skip_reason.
prepare() {
  local name=$1 dir
  if [ "$task" = link ] && [ ! -f "$data_root/$name.h5" ] && [ ! -f "$graphs/$name.h5" ]; then
    skip_reason="absent: no $data_root/$name.h5 (tessera data get $name writes it; a link dataset has no "
    skip_reason+="synthetic stand-in)"
    return 1
  fi
  if [ "$synthetic" -eq 1 ] && [ "$task" != link ]; then
    data_kind=synthetic graph=$graphs/$name-synthetic.h5
    if [ ! -f "$graph" ]; then
      echo "ogb_suite: $name: generating a synthetic stand-in of the same shape ($graph)"
      mpi prep synth "${synth_args[@]}" --name "$name (synthetic stand-in)" -o "$graph" ||
        { skip_reason="prep synth failed"; return 1; }
    fi
    return 0
  fi
  data_kind=real graph=$graphs/$name.h5 dir=$data_root/$raw_dir
  # A graph file tessera.convert wrote (Planetoid, Reddit, ...): the suite partitions a copy of its own.
  if [ ! -f "$graph" ] && [ ! -d "$dir/raw" ] && [ -f "$data_root/$name.h5" ]; then
    echo "ogb_suite: $name: using $data_root/$name.h5"
    cp "$data_root/$name.h5" "$graph" || { skip_reason="cannot copy $data_root/$name.h5"; return 1; }
  fi
  if [ ! -f "$graph" ]; then
    if [ ! -d "$dir/raw" ]; then
      skip_reason="absent: no $dir/raw or $data_root/$name.h5 (see datasets/$name/README.md)"
      return 1
    fi
    echo "ogb_suite: $name: converting $dir"
    "$tessera" prep ogb "$dir" "${prep_args[@]}" --name "$name" -o "$graph" ||
      { skip_reason="prep ogb failed"; return 1; }
  fi
}

# check_info NAME: the counts `tessera info` shows against the dataset's (real data: all; synthetic: sizes).
check_info() {
  local text want missing=""
  text=$(mpi info "$graph" 2>&1) || { info_status="info failed: $(tail -n 1 <<<"$text")"; return 1; }
  echo "$text" >"$out/runs/$1-info.txt"
  for want in "${info[@]}"; do
    if [ "$data_kind" = synthetic ] && [[ "$want" != nodes:* && "$want" != features:* && "$want" != classes:* &&
                                          "$want" != tasks:* ]]; then
      continue
    fi
    grep -qF "$want" <<<"$text" || missing+="${missing:+; }expected '$want'"
  done
  grep -q "^valid:     yes" <<<"$text" || missing+="${missing:+; }not valid"
  [ -z "$missing" ] || { info_status="info mismatch: $missing"; return 1; }
  info_status=ok
}

# run_recipe NAME MODE: one training run, one CSV row.
run_recipe() {
  local name=$1 mode=$2 recipe=$datasets_dir/$1/$2.toml grid args=() log jsonl summary
  [ -f "$recipe" ] || { row "$name,$data_kind,$mode,-,$ranks,-,,,,,,,,,,,no recipe"; return; }
  case "$mode" in
    full) grid=auto ;;
    minibatch) grid=${ranks}x1x1x1; args+=(--grid "$grid") ;;
    sampled) grid=${ranks}ranks
      if [ "$ranks" -gt 1 ] && ! h5ls "$graph/partition/metis-$ranks" >/dev/null 2>&1; then
        mpi partition --data "$graph" --parts "$ranks" || { row "$name,$data_kind,$mode,$grid,$ranks,-,,,,,,,,,,,partition failed"; failures=$((failures + 1)); return; }
      fi ;;
  esac
  [ -z "$epochs" ] || args+=(--epochs "$epochs")
  log=$out/runs/$name-$mode.log
  jsonl=$out/runs/$name-$mode.jsonl
  echo "ogb_suite: $name: $mode ($recipe, $ranks ranks)"
  if ! mpi train --config "$recipe" --data "$graph" "${args[@]}" --quiet --metrics "$jsonl" >"$log" 2>&1; then
    local why; why=$(grep -m1 'tessera: error' "$log" | tr ',' ';')
    row "$name,$data_kind,$mode,$grid,$ranks,-,,,,,,,,,,,failed: ${why:-see runs/$name-$mode.log}"
    failures=$((failures + 1)); return
  fi
  [ "$mode" != full ] || grid=$(sed -nE 's/.* on grid ([0-9x]+) in .*/\1/p' "$log" | head -n 1)
  mv "$jsonl" "$out/runs/$name-$mode-$grid.jsonl"
  summary=$(grep '^best valid' "$log" | tail -n 1)
  "$py" - "$out/runs/$name-$mode-$grid.jsonl" "$summary" "$(expectation "$recipe")" "$data_kind" "$epochs" \
    "$name,$data_kind,$mode,$grid,$ranks" >>"$csv" <<'PY' || failures=$((failures + 1))
import json, re, sys
path, summary, expect, kind, epochs_override, prefix = sys.argv[1:]
m = re.match(r"best valid ([0-9.]+) at epoch (\d+): test ([0-9.]+) after (\d+) epochs \(mean epoch ([0-9.]+) ms over "
             r"this job's \d+ epochs(?: after its first)?; peak memory ([0-9.]+) MiB per rank\)", summary)
if not m:
    print(prefix + ",-" + "," * 10 + ",no summary line"); sys.exit(1)
valid, best_epoch, test, epochs, epoch_ms, peak = m.groups()
records = [json.loads(l) for l in open(path) if l.strip()]
metric = next((r["metric"] for r in records if r.get("kind") == "epoch" and "metric" in r), "accuracy")
sent = [r.get("bytes_max_rank", 0) for r in records if r.get("kind") == "epoch"]
sent = sent[1:] if len(sent) > 1 else sent
bytes_per_rank = int(sum(sent) / max(len(sent), 1))
kind_e, value, spread = expect.split()
judged = kind_e == "expect" and kind == "real" and not epochs_override
meets = "-"
if judged:
    meets = "yes" if float(test) >= float(value) - 2 * float(spread) else "no"
expected = value if kind_e != "none" else ""
print(f"{prefix},{epochs},{test},{valid},{best_epoch},{expected},{spread if expected else ''},"
      f"{'yes' if judged else 'no'},{meets},{epoch_ms},{bytes_per_rank},{peak},ok,{metric}")
sys.exit(1 if meets == "no" else 0)
PY
}

for name in "${names[@]}"; do
  unset raw_dir prep_args info synth_args
  task=node  # a link dataset's dataset.sh says task=link
  # shellcheck source=/dev/null
  source "$datasets_dir/$name/dataset.sh"
  if ! prepare "$name"; then
    if [[ "$skip_reason" == absent* ]] && [ "$skip_missing" -eq 1 ]; then
      echo "ogb_suite: $name: skipped: $skip_reason"
      row "$name,-,-,-,$ranks,-,,,,,,,,,,,skipped: $skip_reason"
    else
      hint=""
      [[ "$skip_reason" == absent* ]] && hint=" (--skip-missing skips an absent dataset)"
      echo "ogb_suite: $name: failed: $skip_reason$hint" >&2
      row "$name,-,-,-,$ranks,-,,,,,,,,,,,$skip_reason"
      failures=$((failures + 1))
    fi
    continue
  fi
  if ! check_info "$name"; then
    echo "ogb_suite: $name: $info_status"
    row "$name,$data_kind,info,-,$ranks,-,,,,,,,,,,,$(tr ',' ';' <<<"$info_status")"
    failures=$((failures + 1))
  fi
  for mode in "${mode_list[@]}"; do run_recipe "$name" "$mode"; done
  shopt -s nullglob
  runs=("$out/runs/$name"-*.jsonl)
  shopt -u nullglob
  if [ ${#runs[@]} -gt 0 ]; then
    "$py" "$root/scripts/plot_metrics.py" "${runs[@]}" -o "$out/plots/$name" --title "$name ($data_kind)" ||
      failures=$((failures + 1))
  fi
done

"$py" "$root/scripts/ogb_summary.py" "$csv" "$out/SUMMARY.md" "$command_line" || failures=$((failures + 1))
echo "ogb_suite: wrote $out (SUMMARY.md, results.csv, runs/, plots/); $failures problem(s)"
[ "$failures" -eq 0 ]
