// SPDX-License-Identifier: BSD-3-Clause
// All-reduce of fp32 data with bf16 on the wire (docs/architecture.md §5, --comm-dtype bf16): half the bytes of an fp32
// all-reduce, with every addition done in fp32. A reduce-scatter by all-to-all of bf16 chunks, each rank
// adding its chunk in fp32 in rank order and rounding the sum once, then an all-gather of the rounded
// sums — so every rank ends with bit-identical values, which replicas of a block must, whatever the
// chunking.
// The data pointer is in DeviceSpace. Where device collectives block (NCCL, or MPI staged through host
// memory: device_collectives.hpp) both stages run inside the constructor; otherwise they are non-blocking
// MPI collectives on the buffers themselves.
#pragma once

#include <string>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/core/views.hpp"

namespace tessera {

/// The element type of the dense all-reduces inside the 3D multiply.
enum class CommDtype {
  F32,  ///< fp32 on the wire
  Bf16  ///< bf16 on the wire, fp32 sums
};
/// The names of CommDtype's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<CommDtype> kCommDtypeNames[] = {
    {CommDtype::F32, "f32"},
    {CommDtype::F32, "fp32", true},
    {CommDtype::Bf16, "bf16"}};
/// f32 or bf16: the name of a value.
inline const char* comm_dtype_name(CommDtype dtype) { return name_of(kCommDtypeNames, dtype); }

/// A bf16 all-reduce in flight; the data must outlive it. Records one AllReduce of count * 2 bytes
/// under `phase` when it completes (an fp32 all-reduce of the same data records count * 4). On one rank
/// it does nothing (the data stay unrounded).
/// It is two non-blocking collectives (all-to-all, then all-gather), and MPI matches collectives on a
/// communicator by the order they start: the all-gather starts only in start_gather() or wait(), never
/// inside test(), so callers can keep that order the same on every rank (pmm's chunked SpMM starts
/// chunk k's gather right after posting chunk k + 1).
class Bf16AllReduce {
 public:
  /// Posts the all-to-all of `count` floats at `data` over `comm`.
  Bf16AllReduce(const Communicator& comm, float* data, int64_t count, std::string phase);
  /// Takes over `other`'s operation.
  Bf16AllReduce(Bf16AllReduce&& other) noexcept;
  Bf16AllReduce& operator=(Bf16AllReduce&&) = delete;
  Bf16AllReduce(const Bf16AllReduce&) = delete;
  Bf16AllReduce& operator=(const Bf16AllReduce&) = delete;
  ~Bf16AllReduce();
  /// Lets MPI progress the current stage; true once the summed values are in `data`.
  bool test();
  /// Completes the all-to-all, adds this rank's chunk and posts the all-gather (no-op after the first call).
  void start_gather();
  /// Completes both stages: the summed values are in `data`.
  void wait();

 private:
  void reduce_my_chunk();
  void finish();
  const Communicator* comm_;
  float* data_;
  int64_t count_, chunk_;
  std::string phase_;
  int stage_ = 0;  // 0: all-to-all in flight, 1: all-gather in flight, 2: done
  MPI_Request request_ = MPI_REQUEST_NULL;
  Vector<uint16_t> send_, recv_, mine_;
  double start_;
};

/// Blocking form: sum of `count` floats over comm, bf16 on the wire.
void all_reduce_bf16(const Communicator& comm, float* data, int64_t count, const std::string& phase);

}  // namespace tessera
