#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# expect_error.sh PATTERN LEFTOVER_GLOB -- COMMAND...
# Passes when COMMAND exits non-zero, its output matches PATTERN (grep -E), prints "tessera: error:",
# and nothing matching LEFTOVER_GLOB exists afterwards (no half-written output).
set -u
pattern=$1 leftover=$2
shift 3
output=$("$@" 2>&1)
rc=$?
echo "$output"
fail() { echo "FAILED: $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "exit code was 0"
grep -q "tessera: error:" <<<"$output" || fail "no 'tessera: error:' line"
grep -Eq -- "$pattern" <<<"$output" || fail "output does not match /$pattern/"
if [ "$leftover" != "-" ]; then
  # shellcheck disable=SC2086
  ls -d $leftover 2>/dev/null && fail "left behind: $leftover"
fi
echo "ok: exit $rc, message matches, nothing left behind"
