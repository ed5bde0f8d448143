// SPDX-License-Identifier: BSD-3-Clause
// Plain serial double-precision reference implementations: small enough to check by eye, and the oracle
// that every optimized kernel and layer is tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tessera/core/csr.hpp"
#include "tessera/core/views.hpp"

namespace tessera::reference {

struct Dense {
  int64_t rows = 0, cols = 0;
  std::vector<double> a;
  Dense() = default;
  Dense(int64_t r, int64_t c, double fill = 0.0) : rows(r), cols(c), a(size_t(r * c), fill) {}
  double& operator()(int64_t i, int64_t j) { return a[size_t(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return a[size_t(i * cols + j)]; }
};

inline Dense random_dense(int64_t r, int64_t c, std::mt19937_64& gen, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  Dense d(r, c);
  for (double& x : d.a) x = u(gen);
  return d;
}

inline Dense matmul(const Dense& x, const Dense& y) {
  Dense z(x.rows, y.cols);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t k = 0; k < x.cols; ++k)
      for (int64_t j = 0; j < y.cols; ++j) z(i, j) += x(i, k) * y(k, j);
  return z;
}

inline Dense transpose(const Dense& x) {
  Dense t(x.cols, x.rows);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t j = 0; j < x.cols; ++j) t(j, i) = x(i, j);
  return t;
}

inline Dense add(const Dense& x, const Dense& y, double beta = 1.0) {
  Dense z = x;
  for (size_t k = 0; k < z.a.size(); ++k) z.a[k] += beta * y.a[k];
  return z;
}

/// Dense form of a host CSR (a pattern counts as ones).
template <class Scalar>
Dense to_dense(const CsrMatrix<Scalar, HostSpace>& m) {
  Dense d(m.num_rows, m.num_cols);
  for (int64_t i = 0; i < m.num_rows; ++i)
    for (int64_t k = m.row_ptr(i); k < m.row_ptr(i + 1); ++k)
      d(i, m.col_idx(k)) += m.is_pattern() ? 1.0 : double(m.values(k));
  return d;
}

/// Copies between Dense and Kokkos matrices of any scalar (through host memory).
template <class Scalar>
Matrix<Scalar> to_view(const Dense& d) {
  HostMatrix<Scalar> h("ref", size_t(d.rows), size_t(d.cols));
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j) h(i, j) = Scalar(d(i, j));
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), h);
}

template <class View>
Dense from_view(const View& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  Dense d(int64_t(h.extent(0)), int64_t(h.extent(1)));
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j) d(i, j) = double(h(i, j));
  return d;
}

/// max |x - y| / max(1, max |y|)
inline double relative_error(const Dense& x, const Dense& y) {
  double diff = 0, top = 1.0;
  for (size_t k = 0; k < x.a.size(); ++k) {
    diff = std::max(diff, std::abs(x.a[k] - y.a[k]));
    top = std::max(top, std::abs(y.a[k]));
  }
  return diff / top;
}

/// Random CSR with `empty_every`-th rows empty and row `dense_row` holding every column.
template <class Scalar>
CsrMatrix<Scalar, HostSpace> random_csr(int64_t rows, int64_t cols, int64_t per_row, int64_t dense_row,
                                        std::mt19937_64& gen, bool pattern = false) {
  std::vector<int64_t> ptr{0}, idx;
  std::vector<Scalar> val;
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < rows; ++i) {
    if (i == dense_row) {
      for (int64_t j = 0; j < cols; ++j) idx.push_back(j), val.push_back(Scalar(u(gen)));
    } else if (i % 5 != 3) {
      for (int64_t k = 0; k < per_row; ++k)
        idx.push_back(int64_t(gen() % uint64_t(cols))), val.push_back(Scalar(u(gen)));
    }
    ptr.push_back(int64_t(idx.size()));
  }
  CsrMatrix<Scalar, HostSpace> m;
  m.num_rows = rows;
  m.num_cols = cols;
  m.row_ptr = HostVector<int64_t>("ptr", ptr.size());
  m.col_idx = HostVector<int64_t>("idx", idx.size());
  for (size_t k = 0; k < ptr.size(); ++k) m.row_ptr(k) = ptr[k];
  for (size_t k = 0; k < idx.size(); ++k) m.col_idx(k) = idx[k];
  if (!pattern) {
    m.values = HostVector<Scalar>("val", val.size());
    for (size_t k = 0; k < val.size(); ++k) m.values(k) = val[k];
  }
  return m;
}

/// Mean softmax cross-entropy over rows with mask != 0 and label >= 0, and its gradient wrt the logits.
inline double softmax_cross_entropy(const Dense& logits, const std::vector<int64_t>& labels,
                                    const std::vector<uint8_t>& mask, Dense* grad) {
  double loss = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < logits.rows; ++i) count += mask[size_t(i)] && labels[size_t(i)] >= 0;
  if (grad) *grad = Dense(logits.rows, logits.cols);
  for (int64_t i = 0; i < logits.rows; ++i) {
    if (!mask[size_t(i)] || labels[size_t(i)] < 0) continue;
    double top = logits(i, 0), z = 0;
    for (int64_t j = 0; j < logits.cols; ++j) top = std::max(top, logits(i, j));
    for (int64_t j = 0; j < logits.cols; ++j) z += std::exp(logits(i, j) - top);
    loss += std::log(z) - (logits(i, labels[size_t(i)]) - top);
    if (grad)
      for (int64_t j = 0; j < logits.cols; ++j)
        (*grad)(i, j) =
            (std::exp(logits(i, j) - top) / z - (j == labels[size_t(i)] ? 1.0 : 0.0)) / double(count);
  }
  return loss / double(count);
}

}  // namespace tessera::reference
