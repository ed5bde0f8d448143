// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/layout.hpp"

#include <numeric>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {
constexpr uint64_t kPermutationStream1 = 0x70310001, kPermutationStream2 = 0x70310002;

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
}  // namespace

AxisRoles roles_for_layer(int layer) {
  switch (layer % 3) {
    case 0:
      return {Axis::X, Axis::Y, Axis::Z};
    case 1:
      return {Axis::Z, Axis::X, Axis::Y};
    default:
      return {Axis::Y, Axis::Z, Axis::X};
  }
}

Layout3D::Layout3D(const GridShape& shape, int64_t num_nodes, std::vector<int64_t> dims, PermuteMode permute,
                   uint64_t seed)
    : shape_(shape), n_(num_nodes), dims_(std::move(dims)) {
  require(dims_.size() >= 2, "a model needs at least one layer");
  const int64_t lcm = std::lcm(std::lcm(int64_t(shape.x), int64_t(shape.y)), int64_t(shape.z));
  n_pad_ = round_up(n_, lcm);
  for (int64_t d : dims_) dims_pad_.push_back(round_up(d, lcm));
  if (permute != PermuteMode::None) {
    p1_ = RandomPermutation(n_, seed, kPermutationStream1);
    p2_ = permute == PermuteMode::Double ? RandomPermutation(n_, seed, kPermutationStream2) : p1_;
  } else {
    p1_ = p2_ = RandomPermutation(n_);
  }
}

std::pair<int64_t, int64_t> Layout3D::node_block(Axis axis, int k) const {
  const int64_t block = n_pad_ / shape_.extent(axis);
  return {k * block, (k + 1) * block};
}

std::pair<int64_t, int64_t> Layout3D::dim_block(int i, Axis axis, int k) const {
  const int64_t block = dims_pad_[size_t(i)] / shape_.extent(axis);
  return {k * block, (k + 1) * block};
}

bool Layout3D::transforms_first(int layer) const {
  const int64_t in_b = padded_dim(layer) / shape_.extent(roles_for_layer(layer).b);
  return layer > 0 && padded_dim(layer + 1) < in_b;
}

}  // namespace tessera
