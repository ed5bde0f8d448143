// SPDX-License-Identifier: BSD-3-Clause
// Compiled as C++20 (Kokkos 5 requires it) while the build is C++17: every public header, through the
// umbrella header, must compile under both.
#include <tessera/tessera.hpp>

static_assert(__cplusplus >= 202002L, "this translation unit is compiled as C++20");

// What the docs show a C++20 application writing: options as designated initializers. Compiled, not run.
[[maybe_unused]] static void designated_options(tessera::Sequential& model) {
  model.add<tessera::GcnConv>(16, tessera::ConvOptions{.relu = true, .dropout = 0.5f});
  [[maybe_unused]] const tessera::TrainerOptions options{.epochs = 100, .clip_grad_norm = 1.0};
  [[maybe_unused]] const tessera::Graph3DOptions load{.layers = 3,
                                                      .normalization = tessera::Normalization::Mean};
}
