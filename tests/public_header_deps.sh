#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What the public headers pull in (issue 13): the 3D and model headers must not need <hdf5.h> (an
# application that hands over its graph in memory never touches HDF5), and the headers that describe only a
# grid's shape or cost must not need <mpi.h>. The preprocessor lists each header's dependencies (-MG keeps
# going past headers it cannot find and lists them by name, so no include path but Tessera's is needed).
#   tests/public_header_deps.sh CXX SOURCE_DIR
set -euo pipefail
cxx=$1 include=$2/src/tessera
deps() { "$cxx" -std=c++17 -I"$(dirname "$include")" -M -MG -x c++ "$include/$1" | tr ' ' '\n'; }
failed=0
needs() {  # needs HEADER FILE -> 0 if HEADER's dependencies include FILE
  local list
  list=$(deps "$1")  # not piped into grep -q: its early exit would fail the pipeline under pipefail
  grep -qx "$2" <<<"$list"
}
# The check must see a dependency where there is one, or it proves nothing.
needs graph/hdf5_io.hpp hdf5.h || { echo "public_header_deps: cannot see graph/hdf5_io.hpp's <hdf5.h>"; exit 1; }
needs comm/communicator.hpp mpi.h || { echo "public_header_deps: cannot see comm/communicator.hpp's <mpi.h>"; exit 1; }
count=0
for h in "$include"/parallel3d/*.hpp "$include"/models/*.hpp "$include"/models/*/*.hpp; do
  rel=${h#"$include"/}
  count=$((count + 1))
  if needs "$rel" hdf5.h; then echo "public_header_deps: $rel pulls in <hdf5.h>"; failed=1; fi
done
for rel in comm/grid_shape.hpp parallel3d/layout.hpp parallel3d/perf_model.hpp; do
  if needs "$rel" mpi.h; then echo "public_header_deps: $rel pulls in <mpi.h>"; failed=1; fi
done
[ "$failed" -eq 0 ] && echo "public_header_deps: $count 3D and model headers without <hdf5.h>; shape headers without <mpi.h>"
exit "$failed"
