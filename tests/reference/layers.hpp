// SPDX-License-Identifier: BSD-3-Clause
// A plain dense double-precision graph layer: aggregation (any dense operator), optional root weight, bias,
// BatchNorm or RMSNorm (training statistics), ReLU and a fixed dropout scale per entry. Forward and
// backward are written out; the test checks this backward by finite differences, then uses it as the
// oracle for the library's layers.
#pragma once

#include <cmath>

#include "dense.hpp"

namespace tessera::reference {

enum class Norm { None, Batch, Rms };

struct LayerWeights {
  Dense w, root, bias, gamma, beta;  // root / bias / gamma, beta empty when absent
};

struct LayerSpec {
  Dense a;  // rows: output nodes, columns: input nodes
  Norm norm = Norm::None;
  bool relu = false;
  Dense scale;  // per output entry: 0 or 1 / (1 - rate); empty: no dropout
  double eps = 1e-5;
};

struct LayerTape {  // forward intermediates kept for backward
  Dense x, ax, z, xhat, out;
  std::vector<double> invstd;  // per column (BatchNorm) or per row (RMSNorm)
};

struct LayerGrads {
  Dense x, w, root, bias, gamma, beta;
};

inline Dense forward(const LayerSpec& s, const LayerWeights& p, const Dense& x, LayerTape& t) {
  t.x = x;
  t.ax = matmul(s.a, x);
  Dense z = matmul(t.ax, p.w);
  if (p.root.rows > 0) z = add(z, matmul(x, p.root));  // the destinations are the input's rows
  if (p.bias.rows > 0)
    for (int64_t i = 0; i < z.rows; ++i)
      for (int64_t j = 0; j < z.cols; ++j) z(i, j) += p.bias(0, j);
  t.z = z;
  Dense y = z;
  if (s.norm != Norm::None) {
    t.xhat = Dense(z.rows, z.cols);
    const bool batch = s.norm == Norm::Batch;
    t.invstd.assign(size_t(batch ? z.cols : z.rows), 0.0);
    for (size_t k = 0; k < t.invstd.size(); ++k) {
      double mean = 0, square = 0;
      const int64_t n = batch ? z.rows : z.cols;
      for (int64_t m = 0; m < n; ++m) {
        const double v = batch ? z(m, int64_t(k)) : z(int64_t(k), m);
        mean += v / double(n), square += v * v / double(n);
      }
      t.invstd[k] = 1.0 / std::sqrt((batch ? square - mean * mean : square) + s.eps);
      for (int64_t m = 0; m < n; ++m) {
        double& h = batch ? t.xhat(m, int64_t(k)) : t.xhat(int64_t(k), m);
        const double v = batch ? z(m, int64_t(k)) : z(int64_t(k), m);
        h = (batch ? v - mean : v) * t.invstd[k];
      }
    }
    for (int64_t i = 0; i < z.rows; ++i)
      for (int64_t j = 0; j < z.cols; ++j) y(i, j) = p.gamma(0, j) * t.xhat(i, j) + p.beta(0, j);
  }
  for (int64_t i = 0; i < y.rows; ++i)
    for (int64_t j = 0; j < y.cols; ++j) {
      if (s.relu) y(i, j) = std::max(y(i, j), 0.0);
      if (s.scale.rows > 0) y(i, j) *= s.scale(i, j);
    }
  t.out = y;
  return y;
}

inline LayerGrads backward(const LayerSpec& s, const LayerWeights& p, const LayerTape& t,
                           const Dense& grad_out) {
  LayerGrads g;
  Dense d = grad_out;  // d loss / d (normalized and shifted values)
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j) {
      if (s.scale.rows > 0) d(i, j) *= s.scale(i, j);
      if (s.relu && t.out(i, j) <= 0) d(i, j) = 0;
    }
  Dense dz = d;
  if (s.norm != Norm::None) {
    g.gamma = Dense(1, d.cols), g.beta = Dense(1, d.cols);
    for (int64_t i = 0; i < d.rows; ++i)
      for (int64_t j = 0; j < d.cols; ++j) g.beta(0, j) += d(i, j), g.gamma(0, j) += d(i, j) * t.xhat(i, j);
    const bool batch = s.norm == Norm::Batch;
    for (size_t k = 0; k < t.invstd.size(); ++k) {
      const int64_t n = batch ? d.rows : d.cols;
      double sum = 0, dot = 0;  // of dxhat and dxhat * xhat over the normalized group
      for (int64_t m = 0; m < n; ++m) {
        const int64_t i = batch ? m : int64_t(k), j = batch ? int64_t(k) : m;
        sum += d(i, j) * p.gamma(0, j), dot += d(i, j) * p.gamma(0, j) * t.xhat(i, j);
      }
      for (int64_t m = 0; m < n; ++m) {
        const int64_t i = batch ? m : int64_t(k), j = batch ? int64_t(k) : m;
        const double dxhat = d(i, j) * p.gamma(0, j);
        dz(i, j) = t.invstd[k] * (dxhat - (batch ? sum / double(n) : 0.0) - t.xhat(i, j) * dot / double(n));
      }
    }
  }
  if (p.bias.rows > 0) {
    g.bias = Dense(1, dz.cols);
    for (int64_t i = 0; i < dz.rows; ++i)
      for (int64_t j = 0; j < dz.cols; ++j) g.bias(0, j) += dz(i, j);
  }
  g.w = matmul(transpose(t.ax), dz);
  g.x = matmul(transpose(s.a), matmul(dz, transpose(p.w)));
  if (p.root.rows > 0) {
    g.root = matmul(transpose(t.x), dz);
    g.x = add(g.x, matmul(dz, transpose(p.root)));
  }
  return g;
}

}  // namespace tessera::reference
