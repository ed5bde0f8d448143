// SPDX-License-Identifier: BSD-3-Clause
// Not installed: how the element-wise kernels and reductions run on the team path (what device builds
// run): a team per block of rows, a thread per row, vector lanes across its entries (or across 8-column
// chunks while a dropout mask is drawn: one random block each), so neighbouring lanes touch neighbouring
// memory. Column reductions give each thread a chunk of one 32-row block and sum its rows in order: the
// same partials, bit for bit, as rows_host.hpp, whose conventions (op, term, add) this file mirrors.
#pragma once

#include <cstdint>

#include "tessera/core/views.hpp"

namespace tessera::impl {

/// Columns per vector lane: a dropout mask's random block covers 8 columns.
constexpr int64_t kChunk = 8;
constexpr int64_t kRowsPerTeam = 16;
/// Entries per thread of the flat element-wise launch.
constexpr int kEntriesPerThread = 8;

/// The largest power of two <= min(units, 32), at least 1: a vector length every backend accepts.
inline int vector_lanes(int64_t units) {
  int lanes = 1;
  while (lanes * 2 <= units && lanes < 32) lanes *= 2;
  return lanes;
}

template <class Op>
void for_each_row_team(const char* name, int64_t rows, int64_t cols, const Op& op, int64_t chunk) {
  if (chunk == 1 && rows * cols <= int64_t(INT32_MAX)) {
    // Entries in 32-bit arithmetic, kEntriesPerThread to a thread, strided so that a warp's accesses stay
    // neighbours: Kokkos 3.4 launches a range in 64-thread blocks on a GPU, and at an entry per thread (or
    // the team launch below, a row per thread and lanes across it) bias + ReLU ran at a third to a half
    // of the device's copy bandwidth on an H200.
    const int n = int(cols), total = int(rows * cols);
    const int items = (total + kEntriesPerThread - 1) / kEntriesPerThread;
    Kokkos::parallel_for(
        name, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int>>(0, items), KOKKOS_LAMBDA(int w) {
          for (int k = 0; k < kEntriesPerThread; ++k) {
            const int t = w + k * items;
            if (t >= total) return;
            const int i = t / n, j = t - i * n;
            op(int64_t(i), int64_t(j), int64_t(j) + 1);
          }
        });
    return;
  }
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const int64_t chunks = (cols + chunk - 1) / chunk;
  Kokkos::parallel_for(
      name, Policy((rows + kRowsPerTeam - 1) / kRowsPerTeam, Kokkos::AUTO, vector_lanes(chunks)),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int64_t first = team.league_rank() * kRowsPerTeam;
        const int64_t last = first + kRowsPerTeam < rows ? first + kRowsPerTeam : rows;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, first, last), [&](int64_t i) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, chunks), [&](int64_t c) {
            op(i, c * chunk, (c + 1) * chunk < cols ? (c + 1) * chunk : cols);
          });
        });
      });
}

template <class Scalar, class Term>
void reduce_rows_team(const char* name, int64_t rows, int64_t cols, const Vector<Scalar>& out,
                      const Term& term) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const int64_t chunks = cols;  // a column per lane: no row term pays per chunk
  Kokkos::parallel_for(
      name, Policy((rows + kRowsPerTeam - 1) / kRowsPerTeam, Kokkos::AUTO, vector_lanes(chunks)),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int64_t first = team.league_rank() * kRowsPerTeam;
        const int64_t last = first + kRowsPerTeam < rows ? first + kRowsPerTeam : rows;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, first, last), [&](int64_t i) {
          Scalar total = 0;
          Kokkos::parallel_reduce(
              Kokkos::ThreadVectorRange(team, chunks),
              [&](int64_t c, Scalar& sum) { sum += term(i, c, c + 1); }, total);
          Kokkos::single(Kokkos::PerThread(team), [&] { out(i) = total; });
        });
      });
}

template <class Scalar, class Add>
void column_partials_team(const char* name, int64_t rows, int64_t cols, const Matrix<Scalar>& partial,
                          const Add& add, int64_t chunk) {
  // One thread per (row block, chunk of `chunk` <= kChunk columns), neighbouring threads on neighbouring
  // chunks; the sums stay in registers for whole chunks of 1 or 8 (a constant trip count once `add` is
  // inlined). Each column's rows are summed in order whatever the chunk: the same bits.
  const int64_t blocks = int64_t(partial.extent(0)), chunks = (cols + chunk - 1) / chunk;
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace>(0, blocks * chunks), KOKKOS_LAMBDA(int64_t t) {
        const int64_t b = t / chunks, c = t - b * chunks;
        const int64_t lo = b * kColumnBlockRows,
                      hi = lo + kColumnBlockRows < rows ? lo + kColumnBlockRows : rows;
        const int64_t j0 = c * chunk, j1 = j0 + chunk < cols ? j0 + chunk : cols;
        Scalar acc[kChunk] = {};
        if (j1 - j0 == 1) {
          for (int64_t i = lo; i < hi; ++i) add(i, j0, j0 + 1, acc);
        } else if (j1 - j0 == kChunk) {
          for (int64_t i = lo; i < hi; ++i) add(i, j0, j0 + kChunk, acc);
        } else {
          for (int64_t i = lo; i < hi; ++i) add(i, j0, j1, acc);
        }
        for (int64_t j = j0; j < j1; ++j) partial(b, j) = acc[j - j0];
      });
}

}  // namespace tessera::impl
