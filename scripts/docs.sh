#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The documentation site: the README (its front page), every page under docs/ and the API reference over the
# public (installed) headers, one Doxygen HTML site in BUILD/docs/html. Exits 1 if Doxygen warns (every
# public symbol is documented, every page link resolves), 77 if doxygen is not installed (scripts/setup.sh
# installs it). tests/docs/check_docs.py checks the pages themselves (links, options, runnable blocks).
#   scripts/docs.sh [BUILD]        (default build/, configured by scripts/setup.sh)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
headers=$build/public_headers.txt
[ -f "$headers" ] || { echo "docs: $headers is missing: configure first (scripts/setup.sh)" >&2; exit 2; }
command -v doxygen >/dev/null || { echo "docs: skipped: doxygen is not installed (apt-get install doxygen)"; exit 77; }
out=$build/docs
mkdir -p "$out"
rm -f "$out/warnings.log"
{
  cat "$root/docs/Doxyfile"
  echo "INPUT = $root/README.md $root/CHANGELOG.md $(find "$root/docs" "$root/datasets" -name '*.md' | sort | tr '\n' ' ') $(tr '\n' ' ' <"$headers")"
  echo "USE_MDFILE_AS_MAINPAGE = $root/README.md"
  echo "STRIP_FROM_PATH = $root/src $root"
  echo "OUTPUT_DIRECTORY = $out"
  echo "WARN_LOGFILE = $out/warnings.log"
} | doxygen - >/dev/null
count=$(grep -c 'warning:' "$out/warnings.log" || true)
if [ "$count" -gt 0 ]; then
  cat "$out/warnings.log"
  echo "docs: $count warnings (every public symbol needs a comment)"
  exit 1
fi
echo "docs: README, $(find "$root/docs" -name '*.md' | wc -l) pages and $(wc -l <"$headers") public headers, no warning; open $out/html/index.html"
