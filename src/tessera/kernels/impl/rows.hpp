// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the element-wise launchers on the path a caller names (rows_host.hpp / rows_team.hpp).
#pragma once

#include <type_traits>

#include "rows_host.hpp"
#include "rows_team.hpp"
#include "tessera/core/scratch.hpp"
#include "tessera/kernels/kernel_path.hpp"

namespace tessera::impl {

/// The team path's columns per lane for an op that draws a dropout mask: its 8-column random blocks while
/// it is on (one draw per lane), single entries while it is off.
template <class Mask>
int64_t dropout_chunk(const Mask& dropout) {
  return dropout.active() ? kChunk : 1;
}

/// op(i, j0, j1) over every row i and chunks [j0, j1) of its columns. `chunk` is the team path's columns
/// per lane: 1 (neighbouring lanes on neighbouring entries) unless op pays per chunk (a dropout mask's
/// random block covers 8 columns: kChunk). Any chunk gives the same results.
template <class Op>
void for_each_row(KernelPath path, const char* name, int64_t rows, int64_t cols, const Op& op,
                  int64_t chunk = 1) {
  if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team)
    for_each_row_team(name, rows, cols, op, chunk);
  else
    for_each_row_host(name, rows, cols, op);
}

/// The launch both split launchers share: `team_op` on the team path and on the host path of device builds
/// (whose row loops run on the device, where a thread would keep local arrays in slow local memory),
/// `host_op` through `launch_host` on a host build's host path.
template <class HostOp, class TeamOp, class HostLaunch>
void launch_split(KernelPath path, const char* name, int64_t rows, int64_t cols, const HostOp& host_op,
                  const TeamOp& team_op, int64_t chunk, const HostLaunch& launch_host) {
  if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team) {
    for_each_row_team(name, rows, cols, team_op, chunk);
  } else if constexpr (std::is_same<DeviceSpace, HostSpace>::value) {
    launch_host(name, rows, cols, host_op);
  } else {
    (void)host_op, (void)launch_host;
    for_each_row_host(name, rows, cols, team_op);
  }
}

/// for_each_row with one formulation per path: `host_op` for the host path of a host build (a plain host
/// lambda given a whole row, free to keep a row's running values in local arrays and to prefetch),
/// `team_op` elsewhere (launch_split). Both must sum in the same order.
template <class HostOp, class TeamOp>
void for_each_row_split(KernelPath path, const char* name, int64_t rows, int64_t cols, const HostOp& host_op,
                        const TeamOp& team_op, int64_t chunk = 1) {
  launch_split(path, name, rows, cols, host_op, team_op, chunk,
               [](const char* n, int64_t r, int64_t c, const auto& op) { for_each_row_host(n, r, c, op); });
}

/// for_each_row_split over the rows of a sparse block, whose work follows their degrees: the host op's rows
/// handed out as threads free up (for_each_uneven_row_host).
template <class HostOp, class TeamOp>
void for_each_sparse_row(KernelPath path, const char* name, int64_t rows, int64_t cols, const HostOp& host_op,
                         const TeamOp& team_op) {
  launch_split(
      path, name, rows, cols, host_op, team_op, 1,
      [](const char* n, int64_t r, int64_t c, const auto& op) { for_each_uneven_row_host(n, r, c, op); });
}

/// out(i) = sum of term(i, j0, j1) over the chunks of row i.
template <class Scalar, class Term>
void reduce_rows(KernelPath path, const char* name, int64_t rows, int64_t cols, const Vector<Scalar>& out,
                 const Term& term) {
  if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team)
    reduce_rows_team(name, rows, cols, out, term);
  else
    reduce_rows_host(name, rows, cols, out, term);
}

/// out(j) = sum over rows of what add(i, j0, j1, acc) adds: fixed 32-row blocks summed in order, then the
/// blocks' partial rows the same way, level after level (identical on both paths).
template <class Scalar, class Add>
void reduce_columns(KernelPath path, const char* name, int64_t rows, int64_t cols, const Vector<Scalar>& out,
                    const Add& add, int64_t chunk = 1) {
  const bool team = resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team;
  int64_t total = 0;  // every level's partial rows, in one allocation
  for (int64_t n = column_blocks(rows);; n = column_blocks(n)) {
    total += n;
    if (n == 1) break;
  }
  const Matrix<Scalar> partials = scratch_matrix<Scalar>("column_partials", size_t(total), size_t(cols));
  const auto sum_blocks = [&](int64_t n, const Matrix<Scalar>& into, const auto& terms, int64_t lanes_chunk) {
    if (team)
      column_partials_team(name, n, cols, into, terms, lanes_chunk);
    else
      column_partials_host(name, n, cols, into, terms);
  };
  int64_t begin = 0, count = column_blocks(rows);
  Matrix<Scalar> level = Kokkos::subview(partials, Kokkos::make_pair(begin, begin + count), Kokkos::ALL);
  sum_blocks(rows, level, add, chunk);
  while (count > 1) {
    const Matrix<const Scalar> below = level;
    const auto sum_rows = KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, Scalar * acc) {
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] += below(i, j);
    };
    const int64_t next = column_blocks(count);
    begin += count;
    level = Kokkos::subview(partials, Kokkos::make_pair(begin, begin + next), Kokkos::ALL);
    sum_blocks(count, level, sum_rows, int64_t(1));
    count = next;
  }
  const Matrix<const Scalar> top = level;
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace>(0, cols), KOKKOS_LAMBDA(int64_t j) { out(j) = top(0, j); });
}

}  // namespace tessera::impl
