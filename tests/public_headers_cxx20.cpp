// SPDX-License-Identifier: BSD-3-Clause
// Compiled as C++20 (Kokkos 5 requires it) while the build is C++17: every public header, through the
// umbrella header, must compile under both.
#include <tessera/tessera.hpp>

static_assert(__cplusplus >= 202002L, "this translation unit is compiled as C++20");
