#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Tessera's job scripts under a real Slurm on this machine: starts local_cluster.sh's one-node cluster,
# submits the CPU job scripts with sbatch (3D full graph, mini-batch, sampled, and the full-graph job
# stopped by `scancel --signal=USR1` then submitted again to resume), waits, checks each job's exit
# code and output, checks the GPU job scripts with `sbatch --test-only` against site-shaped partitions,
# and stops the cluster. Exit 0 when all pass; 77 when Slurm is not installed (setup.sh --with-slurm).
#
#   scripts/slurm/check_local.sh [WORKDIR]     (default: a temporary directory, removed at the end)
# Environment: TESSERA (default build/apps/tessera; used here to make the graph, never handed to the jobs,
# which find the binary as a user's would: from the directory sbatch is called in), SHARED_DIR (Cora's raw
# files: ../shared).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for tool in munged slurmctld slurmd sbatch srun scontrol; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is missing (scripts/setup.sh --with-slurm installs Slurm)"; exit 77; }
done
tessera=${TESSERA:-$root/build/apps/tessera}
[ -x "$tessera" ] || { echo "check_local: $tessera: not built"; exit 1; }
[ "$tessera" -ef "$root/build/apps/tessera" ] ||
  { echo "skipped: the jobs find build/apps/tessera under the repository, and TESSERA names another build"; exit 77; }
unset TESSERA TESSERA_ROOT
work=${1:-}
if [ -z "$work" ]; then
  work=$(mktemp -d /tmp/tessera-slurm-XXXXXX)
  trap 'bash "$root/scripts/slurm/local_cluster.sh" stop "$work/cluster" >/dev/null; rm -rf "$work"' EXIT
else
  mkdir -p "$work" && work=$(cd "$work" && pwd)
  trap 'bash "$root/scripts/slurm/local_cluster.sh" stop "$work/cluster" >/dev/null' EXIT
fi
cd "$work" || exit 1
fail() { echo "FAILED: $*"; exit 1; }
bash "$root/scripts/slurm/local_cluster.sh" start "$work/cluster" || fail "the cluster did not start"
export SLURM_CONF=$work/cluster/slurm.conf
# shellcheck source=/dev/null
source "$root/scripts/mpi_env.sh"

# The graph: Cora when its raw files are beside the repository, else a generated CSBM graph.
shared=${SHARED_DIR:-$root/../shared}
if [ -f "$shared/datasets/cora/raw/edge.csv.gz" ]; then
  "$tessera" prep ogb "$shared/datasets/cora" --symmetrize -o graph.h5 >/dev/null || fail "prep"
else
  "$tessera" prep synth --kind csbm --nodes 3000 --edges 15000 --classes 4 -o graph.h5 >/dev/null || fail "prep"
fi

# job_state ID: "STATE EXIT" once the job has ended (scontrol keeps ended jobs for MinJobAge, 300 s).
job_state() { scontrol show job "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+|ExitCode=[0-9]+' | cut -d= -f2 | xargs; }
wait_job() {  # wait_job ID SECONDS: until the job has ended
  local i state
  for ((i = 0; i < $2 * 2; ++i)); do
    state=$(job_state "$1")
    case "$state" in PENDING*|RUNNING*|CONFIGURING*|COMPLETING*|"") sleep 0.5 ;; *) echo "$state"; return 0 ;; esac
  done
  echo "TIMEOUT"
}
submit() {  # submit NAME SBATCH-ARGS... -- SCRIPT ARGS...: prints the job id
  local name=$1; shift
  # From the repository's root, as its README says: the job finds build/apps/tessera through the submit
  # directory, and runs in $work.
  (cd "$root" && sbatch --parsable -J "$name" -o "$work/$name-%j.out" --chdir "$work" "$@")
}
check_job() {  # check_job NAME ID: completed with exit 0 and a summary line
  local state out
  state=$(wait_job "$2" 240)
  out=$(ls "$work/$1-$2.out" 2>/dev/null)
  [ "$state" = "COMPLETED 0" ] || { cat "$out"; fail "$1 (job $2) ended $state"; }
  grep -q "^best valid" "$out" || { cat "$out"; fail "$1: no summary line"; }
  [ -s "$work/tessera-$2.jsonl" ] || fail "$1: no metrics file"
  echo "ok: $1 (job $2): $(grep '^best valid' "$out")"
}

slurm=$root/scripts/slurm
full=$(submit cpu-full -n 2 "$slurm/cpu_full.sh" graph.h5 auto 30) || fail "sbatch cpu_full.sh"
minibatch=$(submit cpu-minibatch -n 2 "$slurm/cpu_minibatch.sh" graph.h5 2x1x1x1 0.5 20) || fail "sbatch cpu_minibatch.sh"
sampled=$(submit cpu-sampled -n 2 "$slurm/cpu_sampled.sh" graph.h5 10,10 20) || fail "sbatch cpu_sampled.sh"
check_job cpu-full "$full"
check_job cpu-minibatch "$minibatch"
check_job cpu-sampled "$sampled"

# Checkpoint on signal: USR1 to the job's tasks stops them at an epoch end (exit 75); the same job
# submitted again (same graph and options, more epochs) resumes from the checkpoint and finishes.
long=$(submit cpu-resume -n 2 "$slurm/cpu_full.sh" graph.h5 1x1x2 3000) || fail "sbatch (resume job)"
for ((i = 0; i < 240; ++i)); do
  grep -qE "^epoch +3 " "$work/cpu-resume-$long.out" 2>/dev/null && break
  sleep 0.5
done
scancel --signal=USR1 "$long" || fail "scancel --signal=USR1"
state=$(wait_job "$long" 240)
out=$work/cpu-resume-$long.out
[ "$state" = "FAILED 75" ] || { cat "$out"; fail "the signalled job ended '$state', expected exit 75"; }
epoch=$(grep -oE "^stopped by SIGUSR1 after epoch [0-9]+" "$out" | grep -oE "[0-9]+$")
[ -n "$epoch" ] || { cat "$out"; fail "no stop line"; }
echo "ok: job $long stopped by SIGUSR1 after epoch $epoch, exit 75"
again=$(submit cpu-resume -n 2 "$slurm/cpu_full.sh" graph.h5 1x1x2 $((epoch + 10))) || fail "sbatch (resubmission)"
state=$(wait_job "$again" 240)
out=$work/cpu-resume-$again.out
[ "$state" = "COMPLETED 0" ] || { cat "$out"; fail "the resubmitted job ended '$state'"; }
grep -q "resumed from .*checkpoint.h5 after epoch $epoch" "$out" || { cat "$out"; fail "no resume line"; }
echo "ok: job $again resumed after epoch $epoch and finished"

# GPU job scripts: their requests against site-shaped partitions (nothing runs).
for script in perlmutter_full perlmutter_minibatch frontier_full frontier_minibatch; do
  partition=${script%%_*}
  per_node=4; [ "$partition" = frontier ] && per_node=8
  out=$(sbatch --test-only -A check -p "$partition" -N 2 "$slurm/$script.sh" graph.h5 "2x1x1x$per_node" 2>&1)
  grep -q "to start at .* on nodes $partition" <<<"$out" || fail "$script.sh: $out"
  echo "ok: $script.sh: ${out#sbatch: }"
done
# A request the site's nodes cannot meet is refused: the check is not vacuous.
out=$(sbatch --test-only -A check -p perlmutter -N 2 --gpus-per-node=5 "$slurm/perlmutter_full.sh" graph.h5 2>&1)
grep -q "Requested node configuration is not available" <<<"$out" || fail "5 GPUs per Perlmutter node accepted: $out"
echo "ok: every job ran or was accepted under Slurm $(sbatch --version | cut -d' ' -f2)"
