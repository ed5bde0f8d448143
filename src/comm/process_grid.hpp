// SPDX-License-Identifier: BSD-3-Clause
// The 4D process grid D x X x Y x Z of DESIGN §4-5: D data-parallel replicas of a 3D grid.
// rank = ((d*Gz + z)*Gx + x)*Gy + y, Y innermost so Y groups sit inside a node. Each rank owns one
// communicator per axis (the ranks that differ from it only along that axis, ordered by that coordinate)
// and one for its 3D replica.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"

namespace tessera {

enum class Axis { D = 0, X = 1, Y = 2, Z = 3 };
const char* axis_name(Axis axis);

struct GridShape {
  int d = 1, x = 1, y = 1, z = 1;

  int size() const { return d * x * y * z; }
  int extent(Axis axis) const;
  /// "DxXxYxZ", or "XxYxZ" when d == 1.
  std::string str() const;
  /// Parses "XxYxZ" (d = 1) or "DxXxYxZ"; throws Error on anything else or a zero/negative axis.
  static GridShape parse(const std::string& text);
  bool operator==(const GridShape& o) const { return d == o.d && x == o.x && y == o.y && z == o.z; }
};

struct GridCoords {
  int d = 0, x = 0, y = 0, z = 0;
  int get(Axis axis) const;
  /// A copy with the coordinate along `axis` replaced.
  GridCoords with(Axis axis, int value) const;
};

class ProcessGrid {
 public:
  /// Collective over `world`. Throws CollectiveError on every rank if shape.size() != world.size().
  ProcessGrid(const Communicator& world, GridShape shape);
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;
  ProcessGrid(ProcessGrid&&) = default;
  ProcessGrid& operator=(ProcessGrid&&) = default;

  const GridShape& shape() const { return shape_; }
  const GridCoords& coords() const { return coords_; }
  int rank() const { return rank_; }
  int size() const { return shape_.size(); }

  /// Ranks that differ from this one only along `axis`; rank within it == this rank's coordinate.
  const Communicator& axis(Axis axis) const { return axes_[size_t(axis)]; }
  /// The 3D grid (X, Y, Z) holding this rank's replica index d.
  const Communicator& replica() const { return replica_; }

  int rank_of(const GridCoords& c) const;
  GridCoords coords_of(int rank) const;

  /// Every ordered factorization of `ranks` into D x X x Y x Z (with D forced to 1 if !with_d).
  static std::vector<GridShape> factorizations(int ranks, bool with_d);

 private:
  GridShape shape_;
  GridCoords coords_;
  int rank_ = 0;
  std::array<Communicator, 4> axes_;
  Communicator replica_;
};

}  // namespace tessera
