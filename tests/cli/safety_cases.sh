#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# safety_cases.sh CASE: nothing a user owns is lost. Outputs go through links and never over a FIFO or a
# device; inputs that are not regular files are refused before they are opened (no hang); checkpoints are
# not replaced unasked and one job at a time trains into a directory; a diverged or edited model is never
# written or predicted from; option values and --config files read back as given. Environment as cases.sh
# (TESSERA, MPIEXEC, SOURCE_DIR). Exit 0 = pass, 77 = skipped, anything else = failure. FIFOs, links and
# devices are made inside the test's folder (a device only when the test runs as root), never /dev's.
set -u
case_name=$1
work=$(mktemp -d /tmp/tessera-safety-XXXXXX)
trap 'pkill -KILL -f -- "$work/" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
expect_error() { bash "$SOURCE_DIR/tests/cli/expect_error.sh" "$@" || exit 1; }
mpi() { $MPIEXEC -n "$@"; }
fail() { echo "FAILED: $*"; exit 1; }
py=python3; $py -c 'import h5py, numpy' 2>/dev/null || py=/usr/bin/python3
graph() { "$TESSERA" prep synth --kind csbm --nodes 400 --edges 2000 --features 8 --classes 3 --seed 4 -o g.h5 >/dev/null || exit 1; }
# Commands that could hang on a FIFO run under a timeout: a hang is a failure, not a stuck test.
bounded=(timeout 60)
is_link() { [ -L "$1" ] || fail "$1 is no longer a symbolic link"; }

case "$case_name" in
  outputs_through_links)
    graph
    "$TESSERA" train --data g.h5 --epochs 2 --checkpoint ck --quiet >/dev/null || exit 1
    mkdir store
    # A link to a file not there yet, and one to an existing file: both written through, both stay links.
    ln -s store/pred.h5 out.h5 && echo "old" > store/t.csv && ln -s store/t.csv link.csv
    "$TESSERA" predict --checkpoint ck --data g.h5 --output out.h5 --csv link.csv --quiet >/dev/null || exit 1
    is_link out.h5 && is_link link.csv
    [ -s store/pred.h5 ] && head -n 1 store/t.csv | grep -q "^node,prediction" || fail "predict did not write through its links"
    # train's outputs, a symbolic link as DIR/checkpoint.h5, prep reorder and partition --output likewise.
    mkdir lk && ln -s ../store/ck.h5 lk/checkpoint.h5
    ln -s store/p.txt p.txt && ln -s store/e.h5 e.h5 && ln -s store/m.jsonl m.jsonl
    mpi 2 "$TESSERA" train --data g.h5 --grid 2x1x1 --epochs 2 --checkpoint lk --save-predictions p.txt \
      --save-embeddings e.h5 --metrics m.jsonl --quiet >/dev/null || exit 1
    for l in lk/checkpoint.h5 p.txt e.h5 m.jsonl; do is_link "$l"; done
    [ -s store/ck.h5 ] && [ "$(wc -l < store/p.txt)" -eq 400 ] && [ -s store/e.h5 ] && [ -s store/m.jsonl ] ||
      fail "train did not write through its links"
    ln -s store/r.h5 r.h5 && ln -s store/parts.h5 parts.h5
    "$TESSERA" prep reorder g.h5 -o r.h5 --order rcm >/dev/null && is_link r.h5 && [ -s store/r.h5 ] || fail "prep reorder -o link"
    mpi 2 "$TESSERA" partition --data g.h5 --parts 2 --output parts.h5 >/dev/null && is_link parts.h5 && [ -s store/parts.h5 ] ||
      fail "partition --output link"
    ls store | grep -q "tmp-" && fail "a temporary file was left in store/: $(ls store)"
    # Outputs that are not regular files are refused before any work, and left as they were.
    mkfifo pipe.csv pipe.h5
    expect_error "pipe.csv: --csv names a FIFO, not a regular file" "-" -- \
      "${bounded[@]}" "$TESSERA" predict --checkpoint ck --data g.h5 --csv pipe.csv
    expect_error "pipe.h5: --save-embeddings names a FIFO, not a regular file" "-" -- \
      "${bounded[@]}" "$TESSERA" train --data g.h5 --epochs 1 --save-embeddings pipe.h5
    expect_error "pipe.h5: --metrics names a FIFO" "-" -- "${bounded[@]}" "$TESSERA" train --data g.h5 --epochs 1 --metrics pipe.h5
    expect_error "pipe.h5: --output names a FIFO" "-" -- "${bounded[@]}" "$TESSERA" prep reorder g.h5 -o pipe.h5
    expect_error "pipe.h5: --output names a FIFO" "-" -- "${bounded[@]}" "$TESSERA" partition --data g.h5 --parts 2 -o pipe.h5
    [ -p pipe.csv ] && [ -p pipe.h5 ] || fail "a FIFO was replaced"
    if [ "$(id -u)" = 0 ]; then
      mknod null c 1 3 && ln -s null null-link
      expect_error "null: --output names a character device, not a regular file" "-" -- \
        "$TESSERA" predict --checkpoint ck --data g.h5 --output null
      expect_error "null-link: --save-predictions names a character device" "-" -- \
        "$TESSERA" train --data g.h5 --epochs 1 --save-predictions null-link
      [ -c null ] && is_link null-link || fail "the device was replaced"
    else
      echo "not root: the character-device cases are skipped"
    fi
    # Inputs that are not regular files: refused before they are opened, without a hang.
    expect_error "pipe.h5: --data names a FIFO, not a regular file" "-" -- "${bounded[@]}" "$TESSERA" train --data pipe.h5
    expect_error "pipe.h5: --data names a FIFO, not a regular file" "-" -- \
      "${bounded[@]}" "$TESSERA" predict --checkpoint ck --data pipe.h5 --output o.h5
    expect_error "pipe.h5: --checkpoint names a FIFO, not a regular file" "o.h5" -- \
      "${bounded[@]}" "$TESSERA" predict --checkpoint pipe.h5 --data g.h5 --output o.h5
    expect_error "pipe.h5: cannot read: a FIFO, not a regular file" "-" -- "${bounded[@]}" "$TESSERA" info pipe.h5
    expect_error "pipe.csv: --config names a FIFO, not a regular file" "-" -- \
      "${bounded[@]}" "$TESSERA" train --config pipe.csv --data g.h5
    [ -p pipe.h5 ] || fail "the FIFO input was replaced"
    echo "ok: outputs written through links; FIFOs and devices refused and left as they were" ;;

  checkpoint_guard)
    graph
    "$TESSERA" train --data g.h5 --epochs 3 --hidden 8 --checkpoint ck --quiet >/dev/null || exit 1
    cp ck/checkpoint.h5 keep.h5
    # An existing checkpoint is not replaced unasked, by another model or the same.
    expect_error "ck/checkpoint.h5: a checkpoint of an earlier run is there; --resume continues it, --overwrite-checkpoint starts over" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 2 --model sage --checkpoint ck --metrics m.jsonl
    [ ! -e m.jsonl ] || fail "the refused run wrote its metrics"
    expect_error "--overwrite-checkpoint starts over and --resume continues: give one of them" "-" -- \
      "$TESSERA" train --data g.h5 --checkpoint ck --resume --overwrite-checkpoint
    expect_error "--overwrite-checkpoint needs --checkpoint DIR" "-" -- "$TESSERA" train --data g.h5 --overwrite-checkpoint
    cmp ck/checkpoint.h5 keep.h5 || fail "the checkpoint changed"
    "$TESSERA" train --data g.h5 --epochs 2 --model sage --checkpoint ck --overwrite-checkpoint --quiet >/dev/null || exit 1
    "$TESSERA" predict --checkpoint ck --data g.h5 --csv p.csv 2>&1 | grep -q "model sage" || fail "--overwrite-checkpoint"
    # One job per directory: a second is refused naming the first (its host and pid); a job killed with
    # SIGKILL leaves a lock its successor recognizes and takes over.
    "$TESSERA" train --data g.h5 --epochs 100000 --checkpoint "$work/busy" >first.txt 2>&1 &
    for _ in $(seq 1 600); do grep -qE "^epoch +2 " first.txt && break; sleep 0.1; done
    grep -qE "^epoch +2 " first.txt || { cat first.txt; fail "the first job did not train"; }
    pid=$(pgrep -f -- "--checkpoint $work/busy" | head -n 1)
    expect_error "busy: another job trains into this checkpoint directory \(host $(hostname), pid $pid, since [0-9-]+ [0-9:]+ UTC\); wait for it to end or give this run another --checkpoint" "-" -- \
      "$TESSERA" train --data g.h5 --epochs 2 --checkpoint busy --overwrite-checkpoint
    kill -KILL "$pid"; wait 2>/dev/null
    out=$("$TESSERA" train --data g.h5 --epochs 2 --checkpoint busy --overwrite-checkpoint 2>&1) || { echo "$out"; fail "after a killed job"; }
    grep -q "busy: the checkpoint lock of a job that ended (host $(hostname), pid $pid, since" <<<"$out" ||
      { echo "$out"; fail "the stale lock was not named"; }
    echo "ok: checkpoints guarded; one job per directory; a dead job's lock taken over" ;;

  never_diverged)
    $py -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: no python3-h5py / numpy"; exit 77; }
    graph
    "$TESSERA" train --data g.h5 --epochs 2 --checkpoint ck --quiet >/dev/null || exit 1
    # A checkpoint whose parameters hold NaN, one whose forward overflows, one whose model attribute was
    # edited to a huge model: predict refuses each before writing, the last before building the model.
    tamper() {  # tamper SRC DST PYTHON-STATEMENTS (f: the file, p: its /best/param group)
      cp "$1" "$2" && $py - "$2" "$3" <<'PY' || exit 1
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r+")
p = f["best/param"]
exec(sys.argv[2])
PY
    }
    tamper ck/checkpoint.h5 nan.h5 'd = p[sorted(p)[0]]; v = d[:]; v[0, 0] = np.nan; d[...] = v'
    expect_error "nan.h5: the checkpoint's best-validation parameters hold 1 values that are not finite \(a diverged run\); refused" "o.h5" -- \
      "$TESSERA" predict --checkpoint nan.h5 --data g.h5 --output o.h5
    tamper ck/checkpoint.h5 big.h5 'for k in p: p[k][...] = np.where(p[k][:] >= 0, 3e38, -3e38)'
    expect_error "big.h5: the model's logits are not finite for [0-9]+ nodes .*nothing written" "o.h5" -- \
      $MPIEXEC -n 2 "$TESSERA" predict --checkpoint big.h5 --data g.h5 --output o.h5 --csv o.csv
    [ ! -e o.csv ] || fail "predict wrote from non-finite logits"
    tamper ck/checkpoint.h5 edited.h5 "m = f.attrs['model']; m = m.decode() if isinstance(m, bytes) else str(m)
f.attrs['model'] = np.bytes_(m.replace('2x16', '256x4096'))"
    out=$("$TESSERA" predict --checkpoint edited.h5 --data g.h5 --output o.h5 2>&1)
    grep -qE "edited.h5: its model attribute 'gcn 256x4096 \(in 8, out 3, norm none\)' needs at least [0-9]+ weights, but the file stores [0-9]+ parameter values \(an edited or damaged checkpoint\); refused" <<<"$out" ||
      { echo "$out"; fail "the edited model attribute"; }
    echo "ok: predict refuses diverged, overflowing and edited checkpoints" ;;

  values_as_given)
    graph
    # Seeds: whole numbers from 0 to 2^63 - 1, nothing else.
    for seed in -1 18446744073709551615 18446744073709551616 1e23 0x10 1.5; do
      expect_error "--seed must be a whole number from 0 to 2\^63 - 1 \(9223372036854775807\), not '$seed'" "-" -- \
        "$TESSERA" train --data g.h5 --seed "$seed"
    done
    "$TESSERA" train --data g.h5 --seed 9223372036854775807 --print-config | grep -qx "seed=9223372036854775807" ||
      fail "the largest seed"
    # --print-config reads back to the same options for any string.
    weird='run#1 "q" \ back\\slash ünïcødé	tab'
    "$TESSERA" train --data "$weird.h5" --checkpoint "$weird" --metrics "#m" --print-config > a.toml 2>&1 || { cat a.toml; exit 1; }
    "$TESSERA" train --config a.toml --print-config > b.toml 2>&1 || { cat b.toml; exit 1; }
    cmp a.toml b.toml || { diff a.toml b.toml; fail "--print-config does not read back"; }
    $py - a.toml "$weird" <<'PY' || fail "the file is not TOML that reads back to the value"
import sys
try:
    import tomllib
except ImportError:
    sys.exit(0)
with open(sys.argv[1], "rb") as f:
    t = tomllib.load(f)
assert t["checkpoint"] == sys.argv[2] and t["data"] == sys.argv[2] + ".h5" and t["metrics"] == "#m", t
PY
    expect_error "--checkpoint: a value with a line break cannot be written to a configuration file" "-" -- \
      "$TESSERA" train --data g.h5 --checkpoint "$(printf 'a\nb')" --print-config
    # Problems in a --config file name the file and the line.
    printf '# a run\nepochs = 3\n\nhiden = 8\n' > typo.toml
    expect_error "typo.toml: line 4: unknown option 'hiden' for \`tessera train\`" "-" -- "$TESSERA" train --config typo.toml --data g.h5
    printf 'epochs = 3\ndata = g.h5\n' > bare.toml
    expect_error "bare.toml: line 2: 'g.h5' is not a TOML value \(strings are quoted" "-" -- "$TESSERA" train --config bare.toml
    printf 'data = "g.h5"\nhidden = "wide"\n' > conv.toml
    expect_error "conv.toml: line 2: Could not convert: --hidden = wide" "-" -- "$TESSERA" train --config conv.toml
    printf 'data = "g.h5"\n\nlayers = 0\n' > range.toml
    expect_error "range.toml: line 3: --layers must be in \[1, 256\], not 0" "-" -- "$TESSERA" train --config range.toml
    printf 'data = "g.h5"\ncheckpoint = "unterminated\n' > quote.toml
    expect_error "quote.toml: line 2: a string without its closing quote" "-" -- "$TESSERA" train --config quote.toml
    printf '[predict]\nepochs = 3\n' > section.toml
    expect_error "section.toml: line 1: section \[predict\]: this file gives the options of \`tessera train\`" "-" -- \
      "$TESSERA" train --config section.toml --data g.h5
    # A subcommand's own --config, before or after the subcommand's name.
    "$TESSERA" train --data g.h5 --epochs 2 --checkpoint ck --quiet >/dev/null || exit 1
    printf 'checkpoint = "ck"\ndata = "g.h5"\noutput = "o.h5"\nquiet = true\n' > predict.toml
    "$TESSERA" predict --config predict.toml >/dev/null && [ -s o.h5 ] && rm o.h5 || fail "predict --config"
    "$TESSERA" --config predict.toml predict >/dev/null && [ -s o.h5 ] || fail "tessera --config FILE predict"
    expect_error "predict.toml: line 3: unknown option 'output' for \`tessera train\`" "-" -- "$TESSERA" train --config predict.toml
    echo "ok: seeds in range, configurations read back, their problems named by line" ;;

  clear_messages)
    graph
    "$TESSERA" train --data g.h5 --epochs 2 --checkpoint ck --quiet >/dev/null || exit 1
    # predict --quiet: only the accuracy and what was written.
    out=$(mpi 2 "$TESSERA" predict --checkpoint ck --data g.h5 --output o.h5 --quiet) || exit 1
    [ "$(wc -l <<<"$out")" -eq 2 ] && ! grep -q "grid" <<<"$out" || { echo "$out"; fail "predict --quiet"; }
    # The wrong kind of file is named for what it is.
    expect_error "ck/checkpoint.h5: not a Tessera graph file: a Tessera checkpoint \(root attribute format is 'tessera-checkpoint'\)" "-" -- \
      "$TESSERA" info ck/checkpoint.h5
    $py -c 'import h5py, sys; h5py.File(sys.argv[1], "w")["x"] = [1]' plain.h5 2>/dev/null &&
      expect_error "plain.h5: not a Tessera graph file: an HDF5 file without a 'format' attribute" "-" -- "$TESSERA" info plain.h5
    expect_error "g.h5: not a Tessera checkpoint: a Tessera graph file" "q.h5" -- "$TESSERA" predict --checkpoint g.h5 --data g.h5 --output q.h5
    # A partition file without the job's rank count suggests the command that makes it, which works.
    mpi 2 "$TESSERA" partition --data g.h5 --parts 2 --output parts.h5 >/dev/null || exit 1
    out=$(mpi 4 "$TESSERA" train --data g.h5 --mode sampled --partition-file parts.h5 --epochs 1 2>&1)
    suggestion=$(sed -nE "s/.*\(make it with: (tessera partition [^)]*)\).*/\1/p" <<<"$out" | head -n 1)
    [ -n "$suggestion" ] || { echo "$out"; fail "no suggestion"; }
    rm parts.h5 && "$TESSERA" ${suggestion#tessera } >/dev/null || fail "the suggested command failed: $suggestion"
    mpi 4 "$TESSERA" train --data g.h5 --mode sampled --partition-file parts.h5 --epochs 1 --quiet >/dev/null ||
      fail "training after the suggested command"
    # partition into a graph file that cannot be written: said before METIS runs.
    cp g.h5 ro.h5 && chmod 444 ro.h5
    if [ "$(id -u)" = 0 ]; then
      command -v setpriv >/dev/null || { echo "skipped part: no setpriv"; exit 0; }
      chmod 755 "$work"
      as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    else
      as_user=()
    fi
    expect_error "ro.h5: cannot add the partition to --data \(Permission denied\); write it to a file of its own with --output FILE" "-" -- \
      "${as_user[@]}" "$TESSERA" partition --data ro.h5 --parts 2
    echo "ok: quiet predict, formats named, a suggestion that works, partition's output checked first" ;;

  *) echo "unknown case $case_name"; exit 2 ;;
esac
