// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/reduced_precision.hpp"

#include <mutex>
#include <utility>
#include <vector>

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/device_collectives.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/runtime.hpp"

namespace tessera {


namespace {
using Exec = ExecSpace;

// Buffers are reused across calls: a fresh multi-megabyte allocation per all-reduce costs its page faults
// every time (measured: slower than the fp32 all-reduce it replaces). Freed by the runtime's shutdown hook,
// before Kokkos finalizes.
class BufferPool {
 public:
  static BufferPool& instance() {
    static BufferPool pool;
    return pool;
  }
  Vector<uint16_t> acquire(int64_t n) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (size_t k = 0; k < free_.size(); ++k)
      if (int64_t(free_[k].extent(0)) >= n) {
        Vector<uint16_t> v = free_[k];
        free_.erase(free_.begin() + std::ptrdiff_t(k));
        return v;
      }
    return Vector<uint16_t>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("bf16_buffer")),
                            size_t(n));
  }
  void release(Vector<uint16_t>& v) {
    if (v.extent(0) == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(v);
    v = Vector<uint16_t>();
  }

 private:
  BufferPool() {
    add_shutdown_hook([this] {
      const std::lock_guard<std::mutex> lock(mutex_);
      free_.clear();
    });
  }
  std::mutex mutex_;
  std::vector<Vector<uint16_t>> free_;
};
// Kernels as free functions: CUDA's extended lambdas may not live in constructors or private members.
void pack_bf16(const float* x, int64_t count, const Vector<uint16_t>& send, int64_t padded) {
  Kokkos::parallel_for(
      "tessera::to_bf16", Kokkos::RangePolicy<Exec>(0, padded),
      KOKKOS_LAMBDA(int64_t k) { send(k) = k < count ? to_bf16(x[k]) : uint16_t(0); });
  Kokkos::fence();
}

// My chunk of the sum: every rank's bf16 value (mine too) widened and added in fp32, in rank order, then
// rounded once. Rounding my own value as well makes the result independent of which rank owns an element,
// so chunking the data (--overlap) does not change a single bit.
void reduce_chunk(const Vector<uint16_t>& recv, const Vector<uint16_t>& mine, int p, int64_t chunk,
                  int64_t first, int64_t count) {
  Kokkos::parallel_for(
      "tessera::bf16_reduce", Kokkos::RangePolicy<Exec>(0, chunk), KOKKOS_LAMBDA(int64_t i) {
        if (first + i >= count) {
          mine(i) = 0;
          return;
        }
        float sum = 0.0f;
        for (int q = 0; q < p; ++q) sum += from_bf16(recv(q * chunk + i));
        mine(i) = to_bf16(sum);
      });
  Kokkos::fence();
}

void unpack_bf16(const Vector<uint16_t>& all, float* x, int64_t count) {
  Kokkos::parallel_for(
      "tessera::from_bf16", Kokkos::RangePolicy<Exec>(0, count),
      KOKKOS_LAMBDA(int64_t k) { x[k] = from_bf16(all(k)); });
  Kokkos::fence();
}

}  // namespace

Bf16AllReduce::Bf16AllReduce(const Communicator& comm, float* data, int64_t count, std::string phase)
    : comm_(&comm), data_(data), count_(count), phase_(std::move(phase)), start_(wall_seconds()) {
  const int p = comm.size();
  chunk_ = (count + p - 1) / p;
  if (p == 1) {  // nothing to sum, nothing to round
    stage_ = 2;
    return;
  }
  send_ = BufferPool::instance().acquire(chunk_ * p);
  recv_ = BufferPool::instance().acquire(chunk_ * p);
  mine_ = BufferPool::instance().acquire(chunk_);
  pack_bf16(data, count, send_, chunk_ * p);
  if (device_collectives_block(comm) || chunk_ > mpi_chunk_elements<uint16_t>()) {
    // NCCL (stream-ordered), MPI staged through host memory, or a chunk past the MPI chunk limit (moved in
    // pieces; chunk_ is the same on every rank): both stages now, in the same order on every rank, with the
    // same fp32 sums in rank order as the non-blocking form.
    device_all_to_all_u16(comm, send_.data(), chunk_, recv_.data());
    reduce_my_chunk();
    device_all_gather_u16(comm, mine_.data(), chunk_, send_.data());
    finish();
    return;
  }
  const int n = mpi_piece_count<uint16_t>(chunk_, "MPI_Ialltoall");
  check_mpi(
      MPI_Ialltoall(send_.data(), n, MPI_UINT16_T, recv_.data(), n, MPI_UINT16_T, comm.get(), &request_),
      "MPI_Ialltoall");
}

Bf16AllReduce::Bf16AllReduce(Bf16AllReduce&& other) noexcept
    : comm_(other.comm_),
      data_(other.data_),
      count_(other.count_),
      chunk_(other.chunk_),
      phase_(std::move(other.phase_)),
      stage_(std::exchange(other.stage_, 2)),
      request_(std::exchange(other.request_, MPI_REQUEST_NULL)),
      send_(std::move(other.send_)),
      recv_(std::move(other.recv_)),
      mine_(std::move(other.mine_)),
      start_(other.start_) {}

Bf16AllReduce::~Bf16AllReduce() {
  // Never release buffers under a running operation (and let peers finish theirs).
  try {
    wait();
  } catch (...) {
  }
}

void Bf16AllReduce::reduce_my_chunk() {
  reduce_chunk(recv_, mine_, comm_->size(), chunk_, int64_t(comm_->rank()) * chunk_, count_);
}

void Bf16AllReduce::finish() {
  unpack_bf16(send_, data_, count_);  // the all-gather lands in the send buffer, free by now
  comm_->stats().record(phase_, Collective::AllReduce, count_ * 2, wall_seconds() - start_);
  stage_ = 2;
  for (Vector<uint16_t>* v : {&send_, &recv_, &mine_}) BufferPool::instance().release(*v);
}

void Bf16AllReduce::start_gather() {
  if (stage_ != 0) return;
  check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  reduce_my_chunk();
  const int n = mpi_piece_count<uint16_t>(chunk_, "MPI_Iallgather");
  check_mpi(
      MPI_Iallgather(mine_.data(), n, MPI_UINT16_T, send_.data(), n, MPI_UINT16_T, comm_->get(), &request_),
      "MPI_Iallgather");
  stage_ = 1;
}

bool Bf16AllReduce::test() {
  if (stage_ == 2) return true;
  int done = 0;
  check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done && stage_ == 1) finish();
  return stage_ == 2;
}

void Bf16AllReduce::wait() {
  if (stage_ == 2) return;
  start_gather();
  check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  finish();
}

void all_reduce_bf16(const Communicator& comm, float* data, int64_t count, const std::string& phase) {
  Bf16AllReduce op(comm, data, count, phase);
  op.wait();
}

}  // namespace tessera
