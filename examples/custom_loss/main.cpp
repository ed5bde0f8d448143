// SPDX-License-Identifier: BSD-3-Clause
// An application's own loss and a learning-rate schedule, trained on a 1x2x2 grid (4 ranks; 1x1x1 on one
// rank). SmoothedCrossEntropy is cross-entropy against labels smoothed by epsilon (Szegedy et al. 2016):
// the target puts 1 - epsilon on the label and epsilon / K on each of the K classes. The logits' classes may
// be split over ranks (the layout's classes axis), so the softmax's row maximum and sums are agreed over
// that axis before the loss; sum_over_grid then adds every rank's share. The schedule is the library's: a
// linear warm-up over 10 epochs, then a cosine decay to 5% of the learning rate.
//   tessera prep ogb <cora> -o cora.h5 --symmetrize
//   mpiexec -n 4 custom_loss cora.h5
#include <cmath>
#include <cstdio>
#include <tessera/tessera.hpp>

namespace {

using namespace tessera;

// This rank's share of the smoothed loss: the label's term where it holds the label's column, the smoothing
// term once per row (on the ranks holding class 0); writes the gradient softmax - target on every real
// column of covered rows. `top` and `sums` are each row's agreed maximum, sum of exp(z - top) and of z - top.
// (Free functions: nvcc's device lambdas may not sit in private member functions.)
double smoothed_loss_and_gradient(const LossInput& in, double epsilon, const Vector<const float>& top,
                                  const Matrix<const double>& sums, const Matrix<float>& grad) {
  const auto z = in.logits;
  const auto labels = in.labels;
  const auto mask = in.mask;
  const int64_t cols = int64_t(z.extent(1)), real = in.real_columns(), first = in.layout.col_begin;
  const double k = double(in.layout.classes_total);
  double partial = 0;
  Kokkos::parallel_reduce(
      "app::smoothed_loss", Kokkos::RangePolicy<ExecSpace>(0, int64_t(z.extent(0))),
      KOKKOS_LAMBDA(int64_t i, double& sum) {
        const bool covered = mask(i) != 0 && labels(i) >= 0;
        const double log_sum = covered ? ::log(sums(i, 0)) : 0.0;
        if (covered && first == 0) sum += -epsilon / k * (sums(i, 1) - k * log_sum);
        for (int64_t j = 0; j < cols; ++j) {
          const bool label = first + j == labels(i);
          const double log_p = double(z(i, j) - top(i)) - log_sum;
          if (covered && label) sum += -(1.0 - epsilon) * log_p;
          const double target = (label ? 1.0 - epsilon : 0.0) + epsilon / k;
          grad(i, j) = covered && j < real ? float(::exp(log_p) - target) : 0.0f;
        }
      },
      partial);
  return partial;
}

// The rows the loss covers on this rank.
int64_t covered_rows(const LossInput& in) {
  const auto labels = in.labels;
  const auto mask = in.mask;
  int64_t n = 0;
  Kokkos::parallel_reduce(
      "app::covered_rows", Kokkos::RangePolicy<ExecSpace>(0, int64_t(labels.extent(0))),
      KOKKOS_LAMBDA(int64_t i, int64_t & count) { count += mask(i) != 0 && labels(i) >= 0 ? 1 : 0; }, n);
  return n;
}

// Each row's maximum over the real classes, then the sums of exp(z - top) and of z - top, agreed over the
// classes' axis (every rank holding the row's other classes).
void agreed_row_statistics(const LossInput& in, const Vector<float>& top, const Matrix<double>& sums) {
  const auto z = in.logits;
  const int64_t rows = int64_t(z.extent(0)), real = in.real_columns();
  Kokkos::parallel_for(
      "app::row_max", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(int64_t i) {
        float m = -HUGE_VALF;
        for (int64_t j = 0; j < real; ++j) m = z(i, j) > m ? z(i, j) : m;
        top(i) = m;
      });
  device_all_reduce(*in.layout.classes, top.data(), rows, ReduceOp::Max, "app loss max");
  Kokkos::parallel_for(
      "app::row_sums", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(int64_t i) {
        double e = 0, s = 0;
        for (int64_t j = 0; j < real; ++j)
          e += ::exp(double(z(i, j) - top(i))), s += double(z(i, j) - top(i));
        sums(i, 0) = e, sums(i, 1) = s;
      });
  device_all_reduce(*in.layout.classes, sums.data(), 2 * rows, ReduceOp::Sum, "app loss sums");
}

class SmoothedCrossEntropy : public Loss {
 public:
  explicit SmoothedCrossEntropy(double epsilon) : epsilon_(epsilon) {}

  LossSum sum_and_gradient(const LossInput& in, const Matrix<float>& grad) override {
    // Kept from step to step (an allocation per step costs a device synchronization on a GPU).
    const size_t rows = in.logits.extent(0);
    if (top_.extent(0) != rows) {
      top_ = Vector<float>("app::top", rows);
      sums_ = Matrix<double>("app::sums", rows, 2);
    }
    agreed_row_statistics(in, top_, sums_);
    const double partial = smoothed_loss_and_gradient(in, epsilon_, top_, sums_, grad);
    return sum_over_grid(in.layout, partial, covered_rows(in));
  }
  std::string name() const override { return "smoothed_cross_entropy"; }

 private:
  double epsilon_;
  Vector<float> top_;    // each row's agreed maximum
  Matrix<double> sums_;  // each row's agreed sum of exp(z - top) and of z - top
};

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, MPI_THREAD_FUNNELED, [](int argc, char** argv) {
    const Communicator world = Communicator::world();
    world.check(argc == 2, "usage: custom_loss GRAPH.h5 (from tessera prep)");
    const ProcessGrid grid(world,
                           world.size() == 4 ? GridShape{1, 1, 2, 2} : GridShape{1, 1, 1, world.size()});
    Graph3DOptions load;
    load.normalization = Normalization::Symmetric;
    load.normalize_features = true;
    const Graph3D graph = load_graph_3d(GraphFileReader(world, argv[1]), grid, load);

    const uint64_t seed = 2;  // the run's one seed: weights, dropout, sampling
    Sequential model(grid, graph.num_features, RunOptions{}, seed);
    model.add<Dropout>(0.5f);
    ConvOptions hidden;
    hidden.relu = true;
    hidden.dropout = 0.5f;
    model.add<GcnConv>(16, hidden);
    model.add<GcnConv>(graph.num_classes);

    FullGraphSource source(graph, grid, world, model);
    TrainerOptions options;
    options.optimizer.weight_decay = 5e-4f;
    options.epochs = 200;
    options.clip_grad_norm = 5.0;
    Trainer trainer(model, source, world, options);
    trainer.set_loss(std::make_unique<SmoothedCrossEntropy>(0.1));
    trainer.set_schedule(std::make_unique<WarmupSchedule>(10, std::make_unique<CosineSchedule>(0.05)));
    const TrainResult r = trainer.run();
    if (world.rank() == 0)
      std::printf("custom_loss on grid %s (%s, %s): best valid %.4f at epoch %lld, test accuracy %.4f\n",
                  grid.shape().str().c_str(), trainer.loss().name().c_str(),
                  trainer.schedule().describe().c_str(), r.best_valid, (long long)r.best_epoch,
                  r.test_at_best);
    return 0;
  });
}
