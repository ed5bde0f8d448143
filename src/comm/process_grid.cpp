// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/process_grid.hpp"

#include <sstream>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

const char* axis_name(Axis axis) {
  static const char* names[] = {"D", "X", "Y", "Z"};
  return names[int(axis)];
}

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

GridShape GridShape::parse(const std::string& text) {
  std::vector<int> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, 'x')) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(!part.empty() && used == part.size(), "grid '", text, "': '", part,
            "' is not a number (expected XxYxZ or DxXxYxZ, e.g. 2x2x2)");
    require(value > 0, "grid '", text, "': every axis must be at least 1");
    parts.push_back(value);
  }
  require(parts.size() == 3 || parts.size() == 4, "grid '", text,
          "': expected 3 axes (XxYxZ) or 4 (DxXxYxZ), got ", parts.size());
  GridShape s;
  if (parts.size() == 4) s.d = parts[0];
  const size_t o = parts.size() - 3;
  s.x = parts[o];
  s.y = parts[o + 1];
  s.z = parts[o + 2];
  return s;
}

int ProcessGrid::rank_of(const GridCoords& c) const {
  return ((c.d * shape_.z + c.z) * shape_.x + c.x) * shape_.y + c.y;
}

GridCoords ProcessGrid::coords_of(int rank) const {
  GridCoords c;
  c.y = rank % shape_.y;
  rank /= shape_.y;
  c.x = rank % shape_.x;
  rank /= shape_.x;
  c.z = rank % shape_.z;
  c.d = rank / shape_.z;
  return c;
}

ProcessGrid::ProcessGrid(const Communicator& world, GridShape shape) : shape_(shape), rank_(world.rank()) {
  world.check(shape.d > 0 && shape.x > 0 && shape.y > 0 && shape.z > 0,
              "grid " + shape.str() + ": every axis must be at least 1");
  world.check(shape.size() == world.size(), "grid " + shape.str() + " has " + std::to_string(shape.size()) +
                                                " ranks but the job has " + std::to_string(world.size()));
  coords_ = coords_of(rank_);
  // An axis communicator groups the ranks whose other three coordinates agree.
  for (Axis axis : {Axis::D, Axis::X, Axis::Y, Axis::Z}) {
    const GridCoords base = coords_.with(axis, 0);
    axes_[size_t(axis)] = world.split(rank_of(base), coords_.get(axis));
  }
  replica_ = world.split(coords_.d, rank_ % (shape_.x * shape_.y * shape_.z));

  // Check the split: every axis has the right size, ranks equal coordinates, members are the right ranks.
  bool ok = true;
  for (Axis axis : {Axis::D, Axis::X, Axis::Y, Axis::Z}) {
    const Communicator& c = axes_[size_t(axis)];
    ok = ok && c.size() == shape_.extent(axis) && c.rank() == coords_.get(axis);
    std::vector<int> members(size_t(c.size()));
    check_mpi(MPI_Allgather(&rank_, 1, MPI_INT, members.data(), 1, MPI_INT, c.get()), "MPI_Allgather");
    for (int i = 0; i < c.size() && ok; ++i) {
      const GridCoords expect = coords_.with(axis, i);
      ok = members[size_t(i)] == rank_of(expect);
    }
  }
  ok = ok && replica_.size() == shape_.x * shape_.y * shape_.z;
  world.check(ok, "process grid " + shape_.str() + ": axis communicators do not match the grid layout");
}

std::vector<GridShape> ProcessGrid::factorizations(int ranks, bool with_d) {
  std::vector<GridShape> out;
  for (int d = 1; d <= ranks; ++d) {
    if (ranks % d != 0 || (!with_d && d != 1)) continue;
    const int g = ranks / d;
    for (int x = 1; x <= g; ++x) {
      if (g % x != 0) continue;
      for (int y = 1; y <= g / x; ++y) {
        if ((g / x) % y != 0) continue;
        out.push_back(GridShape{d, x, y, g / x / y});
      }
    }
  }
  return out;
}

}  // namespace tessera
