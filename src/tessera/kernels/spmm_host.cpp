// SPDX-License-Identifier: BSD-3-Clause
// SpMM, host path: one task per balanced row block; for each nonzero a contiguous row of X is added into
// Y's row, with later rows of X prefetched. X may be bf16 bits, widened as they are read (half the bytes of
// X's rows; the sums in fp32). On x86 CPUs with AVX2 or AVX-512 a row's sums stay in vector registers over
// its nonzeros (the register rows below); elsewhere, and on devices, the plain loop runs.
#include <atomic>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "impl/spmm_kernels.hpp"
#include "tessera/core/error.hpp"

namespace tessera::impl {

namespace {
// Bytes of X rows requested ahead of use: enough to cover memory latency, few enough to fit the core's
// outstanding-miss buffers (so wide rows are prefetched fewer nonzeros ahead).
constexpr int64_t kPrefetchBytes = 4096;
KOKKOS_INLINE_FUNCTION void prefetch(const char* address) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  __builtin_prefetch(address, 0, 3);
#else
  (void)address;
#endif
}

// The loop use_host_spmm_loop chose (a HostSpmmLoop), and the widest vectors this CPU has, in bits.
std::atomic<int> chosen_loop{int(HostSpmmLoop::Auto)};
int cpu_vector_bits();

// How an entry's weight is formed (SpmmCall): its value, one, or the row's scale times the column's
// (Rows, Cols: the other scales are ones). A template argument, so the inner loop carries no test for it.
enum class Weights { Values, Ones, Rows, Cols, RowsCols };

// One SpMM's operands as plain pointers (in the execution space's memory): what the row loop below reads.
template <class Scalar, class In>
struct RowOperands {
  const int64_t* row_ptr;
  const SpmmColumn* col_idx;
  const Scalar* values;
  const double *row_scale, *col_scale;
  const In* x;
  Scalar* y;
  int64_t x_stride, y_stride, width, nnz;
  Scalar alpha, beta;
};

// The weight of nonzero k of a row (alpha times its value, one, or its scales' product).
template <class Scalar, class In, Weights W>
KOKKOS_FORCEINLINE_FUNCTION Scalar weight_of(const RowOperands<Scalar, In>& m, double row_scale, int64_t k) {
  constexpr bool by_row = W == Weights::Rows || W == Weights::RowsCols;
  constexpr bool by_column = W == Weights::Cols || W == Weights::RowsCols;
  if constexpr (W == Weights::Values) return m.alpha * m.values[k];
  if constexpr (by_row || by_column)
    return m.alpha * scaled_weight<Scalar>(row_scale, by_column ? m.col_scale[m.col_idx[k]] : 1.0);
  return m.alpha;
}

// Nonzeros ahead whose rows of X are requested: kPrefetchBytes of rows, at least one.
KOKKOS_INLINE_FUNCTION int64_t lookahead_distance(int64_t row_bytes) {
  return row_bytes >= kPrefetchBytes ? 1 : kPrefetchBytes / (row_bytes > 0 ? row_bytes : 1);
}

// The row of X `distance` nonzeros ahead of k, requested now: the rows of X are visited in the graph's
// (random) order, so a later nonzero's row is asked for while this one is summed (1.3-2x on a random
// graph). Interleaved with the sums, one row per nonzero: requesting a whole row's worth before its sums
// took twice as long. distance 0: a register loop's later passes over a row, whose rows the first brought in.
template <class Scalar, class In, Weights W>
KOKKOS_FORCEINLINE_FUNCTION void prefetch_ahead(const RowOperands<Scalar, In>& m, int64_t distance,
                                                int64_t k) {
  constexpr bool by_column = W == Weights::Cols || W == Weights::RowsCols;
  if (distance == 0 || k + distance >= m.nnz) return;
  const int64_t ahead_col = m.col_idx[k + distance];
  const char* row = reinterpret_cast<const char*>(m.x + ahead_col * m.x_stride);
  for (int64_t byte = 0; byte < m.width * int64_t(sizeof(In)); byte += 64) prefetch(row + byte);
  if (by_column) prefetch(reinterpret_cast<const char*>(m.col_scale + ahead_col));
}

// Rows [lo, hi) of y = alpha A x + beta y: for each nonzero a contiguous row of X is added into Y's row
// (the plain loop: the reference the register rows are tested against, bit for bit).
template <class Scalar, class In, Weights W>
KOKKOS_INLINE_FUNCTION void spmm_rows(const RowOperands<Scalar, In>& m, int64_t lo, int64_t hi) {
  const int64_t distance = lookahead_distance(m.width * int64_t(sizeof(In)));
  constexpr bool by_row = W == Weights::Rows || W == Weights::RowsCols;
  for (int64_t row = lo; row < hi; ++row) {
    Scalar* KOKKOS_RESTRICT out = m.y + row * m.y_stride;
    if (m.beta == Scalar(0))
      for (int64_t f = 0; f < m.width; ++f) out[f] = Scalar(0);
    else
      for (int64_t f = 0; f < m.width; ++f) out[f] *= m.beta;
    const double scale = by_row ? m.row_scale[row] : 1.0;
    const int64_t end = m.row_ptr[row + 1];
    for (int64_t k = m.row_ptr[row]; k < end; ++k) {
      prefetch_ahead<Scalar, In, W>(m, distance, k);
      const Scalar a = weight_of<Scalar, In, W>(m, scale, k);
      const In* KOKKOS_RESTRICT in = m.x + m.col_idx[k] * m.x_stride;
      for (int64_t f = 0; f < m.width; ++f) out[f] += a * stored_value(in[f]);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__) && !defined(__HIPCC__)
// The register rows: a host compiler with GCC's vector extensions (GCC, Clang) on x86-64. Each ISA gets
// its own entry with its own vector length (a 64-byte vector lowered onto AVX2 goes through the stack):
// 64 bytes and up to 16 vectors of sums under AVX-512, 32 bytes and up to 8 under AVX2 (16 registers), the
// plain loop on CPUs with neither. The file is compiled without floating-point contraction
// (CMakeLists.txt): each element is formed as the plain loop forms it, beta * y (or zero), then + a * x per
// nonzero in order, so every CPU gives the plain loop's bits.
#define TESSERA_SPMM_REGISTER_ROWS 1

template <class Scalar, int Bytes>
struct LanesOf {
  typedef Scalar type __attribute__((vector_size(Bytes)));
};

// Vectors travel by reference: returned or passed by value they would change the calling convention of
// code compiled for the baseline ISA (and Clang refuses that).
template <class V>
KOKKOS_FORCEINLINE_FUNCTION void load_lanes(const void* from, V& v) {
  __builtin_memcpy(&v, from, sizeof v);
}

// A vector of fp32 from half as many bytes of bf16 bits, each widened exactly (its bits become the high
// half).
template <class Floats>
KOKKOS_FORCEINLINE_FUNCTION void load_widened(const uint16_t* from, Floats& v) {
  constexpr int lanes = int(sizeof(Floats) / sizeof(float));
  using Bits = typename LanesOf<uint16_t, 2 * lanes>::type;
  using Words = typename LanesOf<uint32_t, 4 * lanes>::type;
  Bits bits;
  load_lanes(from, bits);
  const Words words = __builtin_convertvector(bits, Words) << 16;
  __builtin_memcpy(&v, &words, sizeof v);
}

// 2 x lanes bf16 entries (one vector's bytes) widened into their even- and odd-numbered entries: the two
// halves of each 32-bit word are one shift and one mask away, cheaper than widening lanes at a time. The
// sums are kept split the same way and interleaved once a row.
template <class Floats>
KOKKOS_FORCEINLINE_FUNCTION void load_bf16_pairs(const uint16_t* from, Floats& even, Floats& odd) {
  using Words = typename LanesOf<uint32_t, int(sizeof(Floats))>::type;
  Words words;
  load_lanes(from, words);
  const Words low = words << 16, high = words & 0xFFFF0000u;
  __builtin_memcpy(&even, &low, sizeof even);
  __builtin_memcpy(&odd, &high, sizeof odd);
}

// Two vectors of y's entries (2 x lanes columns) split into their even and odd entries, and back.
template <class Floats, std::size_t... I>
KOKKOS_FORCEINLINE_FUNCTION void split_pairs(const float* from, Floats& even, Floats& odd,
                                             std::index_sequence<I...>) {
  Floats first, second;
  load_lanes(from, first);
  load_lanes(from + sizeof(Floats) / sizeof(float), second);
  even = __builtin_shufflevector(first, second, (2 * I)...);
  odd = __builtin_shufflevector(first, second, (2 * I + 1)...);
}
template <class Floats, std::size_t... I>
KOKKOS_FORCEINLINE_FUNCTION void join_pairs(const Floats& even, const Floats& odd, float* to,
                                            std::index_sequence<I...>) {
  constexpr std::size_t n = sizeof...(I);
  const Floats first = __builtin_shufflevector(even, odd, (I / 2 + (I % 2) * n)...);
  const Floats second = __builtin_shufflevector(even, odd, (n / 2 + I / 2 + (I % 2) * n)...);
  __builtin_memcpy(to, &first, sizeof first);
  __builtin_memcpy(to + n, &second, sizeof second);
}

// Columns [first, last) of one row of y in one pass over the row's nonzeros: the first Vectors vectors of
// sums (0 or more) and, with Half, one vector of half their length stay in registers and are written once;
// the remaining columns (less than a vector's, or none) are summed in y itself. bf16 entries are widened in
// pairs of vectors where Vectors is even.
template <int Bytes, int Vectors, bool Half, class Scalar, class In, Weights W>
KOKKOS_FORCEINLINE_FUNCTION void spmm_row_columns(const RowOperands<Scalar, In>& m, int64_t row,
                                                  double row_scale, int64_t distance, int64_t first,
                                                  int64_t last) {
  using Lanes = typename LanesOf<Scalar, Bytes>::type;
  using HalfLanes = typename LanesOf<Scalar, Bytes / 2>::type;
  constexpr int lanes = Bytes / int(sizeof(Scalar)), half_at = Vectors * lanes;
  constexpr bool in_pairs = std::is_same<In, uint16_t>::value && Vectors % 2 == 0;
  const auto pair_lanes = std::make_index_sequence<lanes>();
  Scalar* KOKKOS_RESTRICT out = m.y + row * m.y_stride + first;
  const int64_t tail_begin = half_at + (Half ? lanes / 2 : 0), tail_end = last - first;
  Lanes sum[Vectors > 0 ? Vectors : 1];  // Vectors 0: none
  HalfLanes half_sum{};
#pragma GCC unroll 16
  for (int v = 0; v < Vectors; ++v) sum[v] = Lanes{};
  if (m.beta != Scalar(0)) {
    if constexpr (Half) {
      load_lanes(out + half_at, half_sum);
      half_sum *= m.beta;
    }
#pragma GCC unroll 16
    for (int v = 0; v < Vectors; v += in_pairs ? 2 : 1) {
      if constexpr (in_pairs)
        split_pairs(out + v * lanes, sum[v], sum[v + 1], pair_lanes);
      else
        load_lanes(out + v * lanes, sum[v]);
    }
#pragma GCC unroll 16
    for (int v = 0; v < Vectors; ++v) sum[v] *= m.beta;
  }
  for (int64_t f = tail_begin; f < tail_end; ++f) out[f] = m.beta == Scalar(0) ? Scalar(0) : out[f] * m.beta;
  const int64_t end = m.row_ptr[row + 1];
  for (int64_t k = m.row_ptr[row]; k < end; ++k) {
    prefetch_ahead<Scalar, In, W>(m, distance, k);
    const Scalar a = weight_of<Scalar, In, W>(m, row_scale, k);
    const In* KOKKOS_RESTRICT in = m.x + m.col_idx[k] * m.x_stride + first;
#pragma GCC unroll 16
    for (int v = 0; v < Vectors; v += in_pairs ? 2 : 1) {
      Lanes entries, odd;
      if constexpr (in_pairs) {
        load_bf16_pairs(in + v * lanes, entries, odd);
        sum[v + 1] += a * odd;
      } else if constexpr (std::is_same<In, uint16_t>::value) {
        load_widened(in + v * lanes, entries);
      } else {
        load_lanes(in + v * lanes, entries);
      }
      sum[v] += a * entries;
    }
    if constexpr (Half) {
      HalfLanes entries;
      if constexpr (std::is_same<In, uint16_t>::value)
        load_widened(in + half_at, entries);
      else
        load_lanes(in + half_at, entries);
      half_sum += a * entries;
    }
    for (int64_t f = tail_begin; f < tail_end; ++f) out[f] += a * stored_value(in[f]);
  }
#pragma GCC unroll 16
  for (int v = 0; v < Vectors; v += in_pairs ? 2 : 1) {
    if constexpr (in_pairs)
      join_pairs(sum[v], sum[v + 1], out + v * lanes, pair_lanes);
    else
      __builtin_memcpy(out + v * lanes, &sum[v], sizeof(Lanes));
  }
  if constexpr (Half) __builtin_memcpy(out + half_at, &half_sum, sizeof(HalfLanes));
}

// One pass of spmm_row_columns over [first, last) with `vectors` vectors of sums: MaxVectors or a power of
// two from 8 down, or 0.
template <int Bytes, int MaxVectors, bool Half, class Scalar, class In, Weights W>
KOKKOS_FORCEINLINE_FUNCTION void spmm_row_pass(const RowOperands<Scalar, In>& m, int64_t row, double scale,
                                               int64_t distance, int64_t first, int64_t last,
                                               int64_t vectors) {
#define TESSERA_SPMM_PASS(V) \
  spmm_row_columns<Bytes, V, Half, Scalar, In, W>(m, row, scale, distance, first, last)
  if (vectors == MaxVectors) return TESSERA_SPMM_PASS(MaxVectors);
  if (vectors == 8) return TESSERA_SPMM_PASS(8);
  if (vectors == 4) return TESSERA_SPMM_PASS(4);
  if (vectors == 2) return TESSERA_SPMM_PASS(2);
  if (vectors == 1) return TESSERA_SPMM_PASS(1);
  TESSERA_SPMM_PASS(0);
#undef TESSERA_SPMM_PASS
}

// Rows [lo, hi) of y, each in passes over its nonzeros: as many vectors of sums as the ISA's registers
// hold (MaxVectors: 256 floats under AVX-512, 64 under AVX2), then fewer (8, 4, 2, 1), the last pass with a
// half vector where half a vector's columns or more are left, and the columns after it in place. Widths
// up to MaxVectors vectors take one pass when their count of vectors is one of those; the first pass
// requests the rows ahead, later ones find them in cache.
template <int Bytes, int MaxVectors, class Scalar, class In, Weights W>
KOKKOS_FORCEINLINE_FUNCTION void spmm_register_rows(const RowOperands<Scalar, In>& m, int64_t lo,
                                                    int64_t hi) {
  constexpr int64_t lanes = Bytes / int64_t(sizeof(Scalar));
  const int64_t ahead = lookahead_distance(m.width * int64_t(sizeof(In)));
  constexpr bool by_row = W == Weights::Rows || W == Weights::RowsCols;
  for (int64_t row = lo; row < hi; ++row) {
    const double scale = by_row ? m.row_scale[row] : 1.0;
    for (int64_t first = 0, distance = ahead; first < m.width; distance = 0) {
      const int64_t left = (m.width - first) / lanes;
      const int64_t vectors = left >= MaxVectors ? MaxVectors
                              : left >= 8        ? 8
                              : left >= 4        ? 4
                              : left >= 2        ? 2
                                                 : left;
      const int64_t rest = m.width - first - vectors * lanes;  // the last pass: less than a vector left
      const int64_t last = rest < lanes ? m.width : first + vectors * lanes;
      if (rest < lanes && rest >= lanes / 2)
        spmm_row_pass<Bytes, MaxVectors, true, Scalar, In, W>(m, row, scale, distance, first, last, vectors);
      else
        spmm_row_pass<Bytes, MaxVectors, false, Scalar, In, W>(m, row, scale, distance, first, last, vectors);
      first = last;
    }
  }
}

template <class Scalar, class In, Weights W>
__attribute__((target("avx512f"))) void spmm_rows_avx512(const RowOperands<Scalar, In>& m, int64_t lo,
                                                         int64_t hi) {
  spmm_register_rows<64, 16, Scalar, In, W>(m, lo, hi);
}

template <class Scalar, class In, Weights W>
__attribute__((target("avx2"))) void spmm_rows_avx2(const RowOperands<Scalar, In>& m, int64_t lo,
                                                    int64_t hi) {
  spmm_register_rows<32, 8, Scalar, In, W>(m, lo, hi);
}

// spmm_rows on a CPU: the register rows of the loop chosen (host_spmm_loop), else the plain loop (at the
// baseline ISA, four floats an instruction, its sums bound it).
template <class Scalar, class In, Weights W>
void spmm_rows_on_cpu(const RowOperands<Scalar, In>& m, int64_t lo, int64_t hi, HostSpmmLoop loop) {
  if (loop == HostSpmmLoop::Avx512) return spmm_rows_avx512<Scalar, In, W>(m, lo, hi);
  if (loop == HostSpmmLoop::Avx2) return spmm_rows_avx2<Scalar, In, W>(m, lo, hi);
  spmm_rows<Scalar, In, W>(m, lo, hi);
}

int cpu_vector_bits() {
  static const int bits = __builtin_cpu_supports("avx512f") ? 512 : __builtin_cpu_supports("avx2") ? 256 : 0;
  return bits;
}
#else
int cpu_vector_bits() {
  return 0;
}
#endif

template <class Scalar, class In, Weights W>
void spmm_host_weighted(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y) {
  const RowOperands<Scalar, In> m{call.a.row_ptr.data(),
                                  call.a.col_idx.data(),
                                  call.a.values.data(),
                                  call.row_scale.data(),
                                  call.col_scale.data(),
                                  x.data(),
                                  y.data(),
                                  int64_t(x.stride(0)),
                                  int64_t(y.stride(0)),
                                  int64_t(x.extent(1)),
                                  call.a.nnz(),
                                  call.alpha,
                                  call.beta};
  const auto starts = call.block_start;
  const int64_t row_begin = call.row_begin, row_end = call.row_end;
  const HostSpmmLoop loop = host_spmm_loop();
  Kokkos::parallel_for(
      "tessera::spmm_host",
      Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(call.first_block, call.last_block),
      KOKKOS_LAMBDA(int64_t block) {
        const int64_t lo = starts(block) > row_begin ? starts(block) : row_begin;
        const int64_t hi = starts(block + 1) < row_end ? starts(block + 1) : row_end;
#ifdef TESSERA_SPMM_REGISTER_ROWS
        spmm_rows_on_cpu<Scalar, In, W>(m, lo, hi, loop);
#else
        (void)loop;
        spmm_rows<Scalar, In, W>(m, lo, hi);
#endif
      });
}

}  // namespace

template <class Scalar, class In>
void spmm_host(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y) {
  const bool by_row = call.row_scale.extent(0) > 0, by_column = call.col_scale.extent(0) > 0;
  if (by_row && by_column) return spmm_host_weighted<Scalar, In, Weights::RowsCols>(call, x, y);
  if (by_row) return spmm_host_weighted<Scalar, In, Weights::Rows>(call, x, y);
  if (by_column) return spmm_host_weighted<Scalar, In, Weights::Cols>(call, x, y);
  if (call.a.is_pattern()) return spmm_host_weighted<Scalar, In, Weights::Ones>(call, x, y);
  spmm_host_weighted<Scalar, In, Weights::Values>(call, x, y);
}

template void spmm_host<float>(const SpmmCall<float>&, const Matrix<const float>&, const Matrix<float>&);
template void spmm_host<double>(const SpmmCall<double>&, const Matrix<const double>&, const Matrix<double>&);
template void spmm_host<float, uint16_t>(const SpmmCall<float>&, const Matrix<const uint16_t>&,
                                         const Matrix<float>&);

}  // namespace tessera::impl

namespace tessera {

bool host_spmm_loop_available(HostSpmmLoop loop) {
  if (loop == HostSpmmLoop::Avx512) return impl::cpu_vector_bits() >= 512;
  if (loop == HostSpmmLoop::Avx2) return impl::cpu_vector_bits() >= 256;
  return true;
}

HostSpmmLoop host_spmm_loop() {
  const auto loop = HostSpmmLoop(impl::chosen_loop.load(std::memory_order_relaxed));
  if (loop != HostSpmmLoop::Auto) return loop;
  const int bits = impl::cpu_vector_bits();
  return bits >= 512 ? HostSpmmLoop::Avx512 : bits >= 256 ? HostSpmmLoop::Avx2 : HostSpmmLoop::Plain;
}

void use_host_spmm_loop(HostSpmmLoop loop) {
  require(host_spmm_loop_available(loop), "the host SpMM loop ", host_spmm_loop_name(loop),
          " needs vector instructions this CPU or build does not have");
  impl::chosen_loop.store(int(loop), std::memory_order_relaxed);
}

}  // namespace tessera
