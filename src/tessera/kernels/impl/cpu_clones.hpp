// SPDX-License-Identifier: BSD-3-Clause
// Attributes for host loops compiled for several x86 ISAs, the loader picking the clone the CPU runs
// (target_clones): the library is built for its target's baseline ISA (x86-64 without AVX on Debian's
// compilers), where a few row loops are bound by their arithmetic, not by memory. A file that uses them is
// compiled without floating-point contraction (kernels/CMakeLists.txt), so every clone rounds as the
// baseline code does and results do not depend on the CPU. Device compilers and other targets get plain
// functions.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(__HIPCC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
/// A function compiled for AVX-512, AVX2 and the baseline ISA.
#define TESSERA_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#if !defined(__clang__)  // Clang (14) refuses multiversioned function templates and flatten with them
/// TESSERA_CPU_CLONES for a function template (GCC only; elsewhere the baseline ISA's code).
#define TESSERA_CPU_TEMPLATE_CLONES TESSERA_CPU_CLONES
/// Inline everything the function calls, so the loops it reaches are compiled for each clone's ISA.
#define TESSERA_CPU_FLATTEN __attribute__((flatten))
#endif
#endif
#endif
#ifndef TESSERA_CPU_CLONES
#define TESSERA_CPU_CLONES
#endif
#ifndef TESSERA_CPU_TEMPLATE_CLONES
#define TESSERA_CPU_TEMPLATE_CLONES
#endif
#ifndef TESSERA_CPU_FLATTEN
#define TESSERA_CPU_FLATTEN
#endif
