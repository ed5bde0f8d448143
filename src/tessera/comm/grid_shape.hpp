// SPDX-License-Identifier: BSD-3-Clause
// The shape of the 4D process grid D x X x Y x Z (docs/architecture.md §4-5) and a rank's coordinates in it: plain values,
// no MPI, for code that needs only the shape (layouts, the performance model). ProcessGrid builds the
// communicators of a shape.
#pragma once

#include <string>

namespace tessera {

/// A grid axis: D (data-parallel replicas) and the three axes of a 3D replica.
enum class Axis { D = 0, X = 1, Y = 2, Z = 3 };

/// Extents of the four axes.
struct GridShape {
  int d = 1;  ///< data-parallel replicas
  int x = 1;  ///< X extent of a replica
  int y = 1;  ///< Y extent (innermost: Y groups sit inside a node)
  int z = 1;  ///< Z extent

  /// d * x * y * z ranks.
  int size() const { return d * x * y * z; }
  /// The extent along `axis`.
  int extent(Axis axis) const;
  /// "DxXxYxZ", or "XxYxZ" when d == 1.
  std::string str() const;
  /// Every extent equal.
  bool operator==(const GridShape& o) const { return d == o.d && x == o.x && y == o.y && z == o.z; }
};

/// A rank's position in the grid.
struct GridCoords {
  int d = 0;  ///< replica
  int x = 0;  ///< X coordinate
  int y = 0;  ///< Y coordinate
  int z = 0;  ///< Z coordinate
  /// The coordinate along `axis`.
  int get(Axis axis) const;
  /// A copy with the coordinate along `axis` replaced.
  GridCoords with(Axis axis, int value) const;
};

}  // namespace tessera
