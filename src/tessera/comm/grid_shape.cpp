// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/grid_shape.hpp"

#include <sstream>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {
// The member of (d, x, y, z) that `axis` names.
template <class T>
T& pick(Axis axis, T& d, T& x, T& y, T& z) {
  switch (axis) {
    case Axis::D:
      return d;
    case Axis::X:
      return x;
    case Axis::Y:
      return y;
    default:
      return z;
  }
}
}  // namespace

int GridShape::extent(Axis axis) const {
  return pick(axis, d, x, y, z);
}

int GridCoords::get(Axis axis) const {
  return pick(axis, d, x, y, z);
}

GridCoords GridCoords::with(Axis axis, int value) const {
  GridCoords c = *this;
  pick(axis, c.d, c.x, c.y, c.z) = value;
  return c;
}

std::string GridShape::str() const {
  std::ostringstream s;
  if (d != 1) s << d << 'x';
  s << x << 'x' << y << 'x' << z;
  return s.str();
}

}  // namespace tessera
