// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/process_grid.hpp"

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/device_collectives.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

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

ProcessGrid::ProcessGrid(const Communicator& world, GridShape shape)
    : shape_(shape), rank_(world.rank()), comms_(std::make_unique<Comms>()) {
  world.check(shape.d > 0 && shape.x > 0 && shape.y > 0 && shape.z > 0,
              "grid " + shape.str() + ": every axis must be at least 1");
  world.check(shape.size() == world.size(), "grid " + shape.str() + " has " + std::to_string(shape.size()) +
                                                " ranks but the job has " + std::to_string(world.size()));
  coords_ = coords_of(rank_);
  // An axis communicator groups the ranks whose other three coordinates agree.
  for (Axis axis : {Axis::D, Axis::X, Axis::Y, Axis::Z}) {
    const GridCoords base = coords_.with(axis, 0);
    comms_->axes[size_t(axis)] = world.split(rank_of(base), coords_.get(axis));
  }
  comms_->replica = world.split(coords_.d, rank_ % (shape_.x * shape_.y * shape_.z));

  // Check the split: every axis has the right size, ranks equal coordinates, members are the right ranks.
  bool ok = true;
  for (Axis axis : {Axis::D, Axis::X, Axis::Y, Axis::Z}) {
    const Communicator& c = comms_->axes[size_t(axis)];
    ok = ok && c.size() == shape_.extent(axis) && c.rank() == coords_.get(axis);
    std::vector<int> members(size_t(c.size()));
    check_mpi(MPI_Allgather(&rank_, 1, MPI_INT, members.data(), 1, MPI_INT, c.get()), "MPI_Allgather");
    for (int i = 0; i < c.size() && ok; ++i) {
      const GridCoords expect = coords_.with(axis, i);
      ok = members[size_t(i)] == rank_of(expect);
    }
  }
  ok = ok && comms_->replica.size() == shape_.x * shape_.y * shape_.z;
  world.check(ok, "process grid " + shape_.str() + ": axis communicators do not match the grid layout");
}

void ProcessGrid::attach_nccl() {
  // The same order on every rank: NCCL's initialization is collective per communicator.
  for (Communicator& c : comms_->axes) tessera::attach_nccl(c);
  tessera::attach_nccl(comms_->replica);
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
