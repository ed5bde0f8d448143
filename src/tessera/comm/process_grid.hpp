// SPDX-License-Identifier: BSD-3-Clause
// The 4D process grid D x X x Y x Z of docs/architecture.md §4-5: D data-parallel replicas of a 3D grid.
// rank = ((d*Gz + z)*Gx + x)*Gy + y, Y innermost so Y groups sit inside a node. Each rank owns one
// communicator per axis (the ranks that differ from it only along that axis, ordered by that coordinate)
// and one for its 3D replica.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/grid_shape.hpp"

namespace tessera {

/// The communicators of a grid shape: one per axis and one per 3D replica. Move-only (a copy would have to
/// run collectives); the communicators live on the heap, so pointers to them (a layer's LayerComms) stay
/// valid when the grid is moved.
class ProcessGrid {
 public:
  /// Collective over `world`. Throws CollectiveError on every rank if shape.size() != world.size().
  ProcessGrid(const Communicator& world, GridShape shape);
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;
  /// Takes over the communicators (their addresses stay the same).
  ProcessGrid(ProcessGrid&&) = default;
  /// Takes over the communicators (their addresses stay the same).
  ProcessGrid& operator=(ProcessGrid&&) = default;

  /// The grid's shape.
  const GridShape& shape() const { return shape_; }
  /// This rank's coordinates.
  const GridCoords& coords() const { return coords_; }
  /// This rank in the communicator the grid was made from.
  int rank() const { return rank_; }
  /// Ranks in the grid.
  int size() const { return shape_.size(); }

  /// Ranks that differ from this one only along `axis`; rank within it == this rank's coordinate.
  const Communicator& axis(Axis axis) const { return comms_->axes[size_t(axis)]; }
  /// The 3D grid (X, Y, Z) holding this rank's replica index d.
  const Communicator& replica() const { return comms_->replica; }

  /// Collective: gives every axis and replica communicator an NCCL communicator (device_collectives.hpp),
  /// so the device collectives over them run through NCCL. Throws on every rank without NCCL.
  void attach_nccl();
  /// Whether attach_nccl() ran.
  bool uses_nccl() const { return comms_->replica.nccl() != nullptr; }

  /// The rank at coordinates c.
  int rank_of(const GridCoords& c) const;
  /// The coordinates of a rank.
  GridCoords coords_of(int rank) const;

  /// Every ordered factorization of `ranks` into D x X x Y x Z (with D forced to 1 if !with_d).
  static std::vector<GridShape> factorizations(int ranks, bool with_d);

 private:
  GridShape shape_;
  GridCoords coords_;
  int rank_ = 0;
  struct Comms {
    std::array<Communicator, 4> axes;
    Communicator replica;
  };
  std::unique_ptr<Comms> comms_;
};

}  // namespace tessera
