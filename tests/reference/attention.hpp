// SPDX-License-Identifier: BSD-3-Clause
// A plain dense double-precision graph attention layer (GAT): the edge softmax written over a dense mask of
// the edges, the heads concatenated or averaged, bias, ReLU or ELU, and fixed dropout scales (per edge and
// head, per output entry). Forward and backward are written out here from the definitions; the test checks
// the backward by finite differences, then holds the library's GatConv to both.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "dense.hpp"

namespace tessera::reference {

enum class Act { None, Relu, Elu };

struct GatSpec {
  Dense mask;  // rows: destinations, columns: sources; 1 where the edge (or the self loop) is
  int64_t heads = 1;
  bool concat = true;
  double slope = 0.2;
  Act act = Act::None;
  std::vector<Dense> edge_scale;  // per head: n x n, 0 or 1 / (1 - rate); empty: no attention dropout
  Dense out_scale;                // per output entry; empty: no dropout
};

struct GatWeights {
  Dense w, att_src, att_dst, bias;  // w: in x H F; att_*: H x F; bias: 1 x out (empty: none)
};

struct GatTape {
  Dense x, z, pre;
  std::vector<Dense> alpha, score;  // per head: n_out x n_in, the softmax and the pre-activation score
};

struct GatGrads {
  Dense x, w, att_src, att_dst, bias;
};

inline double gat_act(double x, Act a) {
  return a == Act::Relu ? std::max(x, 0.0) : a == Act::Elu ? (x > 0 ? x : std::expm1(x)) : x;
}
inline double gat_act_slope(double x, Act a) {
  return a == Act::Relu ? (x > 0 ? 1.0 : 0.0) : a == Act::Elu ? (x > 0 ? 1.0 : std::exp(x)) : 1.0;
}

inline Dense gat_forward(const GatSpec& s, const GatWeights& p, const Dense& x, GatTape& t) {
  const int64_t n_out = s.mask.rows, n_in = s.mask.cols, H = s.heads, F = p.att_src.cols;
  t.x = x;
  t.z = matmul(x, p.w);
  const int64_t width = s.concat ? H * F : F;
  Dense y(n_out, width);
  t.alpha.assign(size_t(H), Dense(n_out, n_in));
  t.score.assign(size_t(H), Dense(n_out, n_in));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < n_out; ++i) {
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n_in; ++j) {
        if (s.mask(i, j) == 0) continue;
        double e = 0;
        for (int64_t f = 0; f < F; ++f)
          e += t.z(i, h * F + f) * p.att_dst(h, f) + t.z(j, h * F + f) * p.att_src(h, f);
        t.score[size_t(h)](i, j) = e;
        const double leaky = e > 0 ? e : s.slope * e;
        top = std::max(top, leaky);
      }
      double sum = 0;
      for (int64_t j = 0; j < n_in; ++j) {
        if (s.mask(i, j) == 0) continue;
        const double e = t.score[size_t(h)](i, j);
        sum += t.alpha[size_t(h)](i, j) = std::exp((e > 0 ? e : s.slope * e) - top);
      }
      for (int64_t j = 0; j < n_in; ++j) t.alpha[size_t(h)](i, j) /= sum > 0 ? sum : 1.0;
      for (int64_t j = 0; j < n_in; ++j) {
        const double a =
            t.alpha[size_t(h)](i, j) * (s.edge_scale.empty() ? 1.0 : s.edge_scale[size_t(h)](i, j));
        for (int64_t f = 0; f < F; ++f)
          y(i, s.concat ? h * F + f : f) += a * t.z(j, h * F + f) / (s.concat ? 1.0 : double(H));
      }
    }
  }
  t.pre = y;
  Dense out(n_out, width);
  for (int64_t i = 0; i < n_out; ++i)
    for (int64_t c = 0; c < width; ++c) {
      if (p.bias.rows > 0) t.pre(i, c) += p.bias(0, c);
      out(i, c) = gat_act(t.pre(i, c), s.act) * (s.out_scale.rows > 0 ? s.out_scale(i, c) : 1.0);
    }
  return out;
}

inline GatGrads gat_backward(const GatSpec& s, const GatWeights& p, const GatTape& t, const Dense& grad_out) {
  const int64_t n_out = s.mask.rows, n_in = s.mask.cols, H = s.heads, F = p.att_src.cols;
  const int64_t width = s.concat ? H * F : F;
  GatGrads g;
  Dense d(n_out, width);
  for (int64_t i = 0; i < n_out; ++i)
    for (int64_t c = 0; c < width; ++c)
      d(i, c) = grad_out(i, c) * (s.out_scale.rows > 0 ? s.out_scale(i, c) : 1.0) *
                gat_act_slope(t.pre(i, c), s.act);
  if (p.bias.rows > 0) {
    g.bias = Dense(1, width);
    for (int64_t i = 0; i < n_out; ++i)
      for (int64_t c = 0; c < width; ++c) g.bias(0, c) += d(i, c);
  }
  Dense gz(t.z.rows, t.z.cols);
  g.att_src = Dense(H, F), g.att_dst = Dense(H, F);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < n_out; ++i) {
      // d loss / d alpha(i, j) and the softmax's backward over the row.
      std::vector<double> galpha(size_t(n_in), 0.0);
      double row = 0;
      for (int64_t j = 0; j < n_in; ++j) {
        if (s.mask(i, j) == 0) continue;
        const double scale = s.edge_scale.empty() ? 1.0 : s.edge_scale[size_t(h)](i, j);
        double dot = 0;
        for (int64_t f = 0; f < F; ++f) {
          const double gy = d(i, s.concat ? h * F + f : f) / (s.concat ? 1.0 : double(H));
          dot += gy * t.z(j, h * F + f);
          gz(j, h * F + f) += t.alpha[size_t(h)](i, j) * scale * gy;
        }
        galpha[size_t(j)] = dot * scale;
        row += t.alpha[size_t(h)](i, j) * galpha[size_t(j)];
      }
      for (int64_t j = 0; j < n_in; ++j) {
        if (s.mask(i, j) == 0) continue;
        const double e = t.score[size_t(h)](i, j);
        const double ge = t.alpha[size_t(h)](i, j) * (galpha[size_t(j)] - row) * (e > 0 ? 1.0 : s.slope);
        for (int64_t f = 0; f < F; ++f) {
          gz(i, h * F + f) += ge * p.att_dst(h, f);
          gz(j, h * F + f) += ge * p.att_src(h, f);
          g.att_dst(h, f) += ge * t.z(i, h * F + f);
          g.att_src(h, f) += ge * t.z(j, h * F + f);
        }
      }
    }
  }
  g.w = matmul(transpose(t.x), gz);
  g.x = matmul(gz, transpose(p.w));
  return g;
}

}  // namespace tessera::reference
