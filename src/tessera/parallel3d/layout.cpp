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

int64_t lcm_of(const GridShape& shape) {
  return std::lcm(std::lcm(int64_t(shape.x), int64_t(shape.y)), int64_t(shape.z));
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

int64_t padded_width(int64_t width, const GridShape& shape) {
  return round_up(width, lcm_of(shape));
}

std::pair<int64_t, int64_t> width_block(int64_t width, const GridShape& shape, Axis axis, int k) {
  const int64_t block = padded_width(width, shape) / shape.extent(axis);
  return {k * block, (k + 1) * block};
}

bool transforms_first(int layer, int64_t in, int64_t out, const GridShape& shape, bool cached_input) {
  const int64_t in_b = padded_width(in, shape) / shape.extent(roles_for_layer(layer).b);
  return !cached_input && padded_width(out, shape) < in_b;
}

NodeLayout::NodeLayout(const GridShape& shape, int64_t num_nodes, PermuteMode permute, uint64_t seed,
                       int64_t chunk)
    : shape_(shape),
      n_(num_nodes),
      n_pad_(round_up(num_nodes, lcm_of(shape))),
      one_order_(permute != PermuteMode::Double) {
  if (permute != PermuteMode::None) {
    p1_ = RandomPermutation(n_, seed, kPermutationStream1, chunk);
    p2_ = permute == PermuteMode::Double ? RandomPermutation(n_, seed, kPermutationStream2, chunk) : p1_;
  } else {
    p1_ = p2_ = RandomPermutation(n_);
  }
}

std::pair<int64_t, int64_t> NodeLayout::node_block(Axis axis, int k) const {
  const int64_t block = n_pad_ / shape_.extent(axis);
  return {k * block, (k + 1) * block};
}

Layout3D::Layout3D(const GridShape& shape, int64_t num_nodes, std::vector<int64_t> dims, PermuteMode permute,
                   uint64_t seed)
    : nodes_(shape, num_nodes, permute, seed), dims_(std::move(dims)) {
  require(dims_.size() >= 2, "a model needs at least one layer");
}

}  // namespace tessera
