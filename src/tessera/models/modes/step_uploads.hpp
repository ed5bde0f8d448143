// SPDX-License-Identifier: BSD-3-Clause
// Device copies of a step's host-built blocks and node-id lists, in buffers a batch source keeps between
// steps. A fresh View per array and step was zeroed, then overwritten by the copy, and (host builds) copied
// once more into the 32-bit column ids CsrSpmm keeps: about 16 MB allocated and written three times a step
// for fanouts 5,10,15 on an arxiv-shaped graph. Here each array is written once, into a buffer that grows
// with headroom and serves the next step again, so a step no larger than one before allocates nothing. The
// mini-batch cut also gathers its input rows (about 22 MB a step for the same fanouts), labels, training
// mask and task labels into them, and the mini-batch cut made with kernels writes its blocks there too.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/csr.hpp"
#include "tessera/kernels/spmm.hpp"
#include "tessera/sampling/induced.hpp"

namespace tessera {

/// Buffers for one step's uploads at a time. What it hands out is valid until the next restart(), which
/// hands the same buffers out again: a source calls it once the step before has nothing left to read.
class StepUploads {
 public:
  /// Starts a step: the buffers are handed out again from the first, overwriting the step before's copies.
  void restart();
  /// The next block's device copy, its column ids as CsrSpmm keeps them (SpmmColumn: a block with more
  /// columns than those hold is refused). A pattern (no values) stays a pattern.
  CsrMatrix<float, DeviceSpace, SpmmColumn> csr(const HostCsr& a);
  /// The `rows` x `cols` pattern with a one at (i, i) for every i below both (a sampled layer's self block
  /// and, rows and cols swapped, its transpose), written in a kernel: nothing copied from the host.
  CsrMatrix<float, DeviceSpace, SpmmColumn> leading_identity(int64_t rows, int64_t cols);
  /// `a` as an operator that keeps its row blocks (made on its first host or team product) in the next of
  /// these buffers, not in memory of its own (CsrSpmm::keep_row_blocks_in). Host builds only: on device
  /// builds, whose vendor products split no rows, `a` as a plain operator.
  CsrSpmm<float> spmm(CsrMatrix<float, DeviceSpace, SpmmColumn> a);
  /// The next id list's device copy: ids[0, count).
  Vector<int64_t> ids(const int64_t* ids, size_t count);
  /// The next `count` ids for the caller to fill (a buffer handed out to fill holds whatever it held).
  Vector<int64_t> ids(size_t count);
  /// The next `count` block offsets for the caller to fill (a block cut on the device).
  Vector<int64_t> offsets(size_t count);
  /// The next `count` column ids for the caller to fill.
  Vector<SpmmColumn> columns(size_t count);
  /// The next `count` values for the caller to fill.
  Vector<float> values(size_t count);
  /// The next `rows` x `cols` block of floats for the caller to fill (a step's gathered input rows); its
  /// entries are whatever the buffer held.
  Matrix<float> rows(int64_t rows, int64_t cols);
  /// The next `count` labels for the caller to fill (a step's gathered output rows; entries are whatever
  /// the buffer held).
  Vector<int64_t> labels(size_t count);
  /// The next `count` mask flags for the caller to fill.
  Vector<uint8_t> mask(size_t count);
  /// The next `rows` x `tasks` task labels for the caller to fill.
  Matrix<int8_t> task_rows(int64_t rows, int64_t tasks);
  /// Device bytes the buffers hold.
  int64_t bytes() const;

 private:
  // Buffers of one View type, handed out in order; a buffer grows (by a quarter more than asked) only
  // where a step needs more than it holds, and a block is allocated again for another width.
  template <class View>
  struct Pool {
    explicit Pool(const char* name) : label(name) {}
    const char* label;
    std::vector<View> held;
    size_t used = 0;
    View next(size_t count);                // a vector's first `count` entries
    View next(int64_t rows, int64_t cols);  // a block's first `rows` rows
    int64_t bytes() const;
  };
  Pool<Vector<int64_t>> offsets_{"step.row_ptr"}, ids_{"step.ids"}, labels_{"step.labels"};
  Pool<Vector<int64_t>> row_blocks_{"step.row_blocks"};
  Pool<Vector<SpmmColumn>> columns_{"step.col_idx"};
  Pool<Vector<float>> values_{"step.values"};
  Pool<Vector<uint8_t>> mask_{"step.mask"};
  Pool<Matrix<float>> rows_{"step.rows"};
  Pool<Matrix<int8_t>> task_rows_{"step.targets"};
};

}  // namespace tessera
